// Generated from package.json by scripts/write-version.ts (run by `npm version`). Do not edit.
export const PACKAGE_NAME = 'conversation-orchestrator';
export const PACKAGE_VERSION = '0.1.0';
