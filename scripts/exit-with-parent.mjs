// Preloaded into the demo service when scripts/start.mjs runs it on another Node.js: when the
// launcher is gone (killed with SIGKILL, so it could pass nothing on), the service ends the same
// way, as one process would. The IPC channel is unref'd: it never keeps the service alive.
if (process.channel) {
  process.channel.unref();
  process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));
}
