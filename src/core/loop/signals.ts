/**
 * One 'abort' listener per signal, however many runs share it: Node warns past ten listeners on
 * one EventTarget (MaxListenersExceededWarning), and an application may start hundreds of runs
 * under one request's signal.
 */
interface Subscription {
  readonly callbacks: Set<() => void>;
  readonly listener: () => void;
}

const subscriptions = new WeakMap<AbortSignal, Subscription>();

/** Calls `callback` when `signal` aborts; returns the unsubscribe function. */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  let subscription = subscriptions.get(signal);
  if (subscription === undefined) {
    const callbacks = new Set<() => void>();
    const listener = () => {
      subscriptions.delete(signal);
      for (const call of [...callbacks]) {
        try {
          call();
        } catch {
          // One run's failure to settle must not keep the others from hearing of the abort.
        }
      }
    };
    subscription = { callbacks, listener };
    subscriptions.set(signal, subscription);
    signal.addEventListener('abort', listener, { once: true });
  }
  const { callbacks, listener } = subscription;
  callbacks.add(callback);
  return () => {
    if (!callbacks.delete(callback) || callbacks.size > 0) return;
    signal.removeEventListener('abort', listener);
    if (subscriptions.get(signal)?.callbacks === callbacks) subscriptions.delete(signal);
  };
}
