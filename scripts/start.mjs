// `npm start`: the demo service (service/main.ts), run from its TypeScript sources through tsx.
// The supported Node.js lines are 22 and 24. On an older Node (a machine with Debian's 20) the
// service runs on Node 24 fetched once from the npm registry (scripts/node-line.sh), its native
// addon (better-sqlite3) rebuilt for it, so that `npm install && npm start` works as the README
// says on any machine with npm.
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SUPPORTED = 22;
const FALLBACK = '24';
const major = Number(process.versions.node.split('.')[0]);

if (major >= SUPPORTED) {
  // In this process: signals, exit codes and `kill -9` reach the service itself.
  const { register } = await import('tsx/esm/api');
  register();
  await import('../service/main.ts');
} else {
  const line = spawnSync('bash', [`${ROOT}scripts/node-line.sh`, FALLBACK], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (line.status !== 0) {
    console.error(
      `npm start needs Node.js ${SUPPORTED} or 24, got ${process.version}, and Node.js ${FALLBACK} could not be fetched from the npm registry`,
    );
    process.exit(1);
  }
  const home = line.stdout.trim();
  const node = `${home}/bin/node`;
  const env = { ...process.env, PATH: `${home}/bin:${process.env.PATH}`, npm_config_nodedir: home };
  console.error(
    `Node.js ${process.version} is past its end of life (22 and 24 are supported): running the demo on ${spawnSync(node, ['-v'], { encoding: 'utf8' }).stdout.trim()} from ${home}`,
  );
  const loads = () =>
    spawnSync(node, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], {
      cwd: ROOT,
      stdio: 'ignore',
    }).status === 0;
  if (!loads()) {
    console.error(`building better-sqlite3 for ${home} (once, about a minute)`);
    spawnSync('npm', ['rebuild', 'better-sqlite3', '--loglevel=error'], {
      cwd: ROOT,
      env,
      stdio: 'inherit',
    });
  }
  const child = spawn(
    node,
    [
      '--import',
      './scripts/exit-with-parent.mjs',
      '--import',
      'tsx',
      'service/main.ts',
      ...process.argv.slice(2),
    ],
    { cwd: ROOT, env, stdio: ['inherit', 'inherit', 'inherit', 'ipc'] },
  );
  // Ctrl-C reaches the whole process group, the service included; the signals a supervisor sends
  // to this process alone are passed on. A `kill -9` of this process ends the service as well
  // (exit-with-parent.mjs), as it would end a service run in-process.
  process.on('SIGINT', () => {});
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal === null ? 1 : 128)));
}
