/** `npm run dashboards`: writes grafana/dashboards/*.json from grafana/dashboards.ts. */
import { writeFileSync } from 'node:fs';
import { DASHBOARDS, render } from './dashboards.ts';

for (const [file, make] of Object.entries(DASHBOARDS)) {
  writeFileSync(new URL(`./dashboards/${file}`, import.meta.url), render(make));
  process.stdout.write(`wrote grafana/dashboards/${file}\n`);
}
