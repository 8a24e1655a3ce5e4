#!/usr/bin/env node
/** The `conversation-orchestrator` bin (`package.json` `bin`): see command.ts. */
import { runCommand } from './command.ts';

process.exitCode = await runCommand(process.argv.slice(2), {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  cwd: process.cwd(),
});
