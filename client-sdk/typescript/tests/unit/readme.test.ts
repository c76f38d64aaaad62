// The README's example is examples/quickstart.ts, which a scenario test runs.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { SDK_DIR } from '../vectors.js';

test('the README shows examples/quickstart.ts as it is', () => {
  const readme = readFileSync(join(SDK_DIR, 'README.md'), 'utf8');
  const quickstart = readFileSync(join(SDK_DIR, 'examples', 'quickstart.ts'), 'utf8');
  const code = quickstart.slice(quickstart.indexOf('import {'));
  assert.ok(readme.includes('```ts\n' + code + '```'), 'the README example and examples/quickstart.ts differ');
  const pkg = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')) as { name: string; version: string };
  assert.equal(pkg.name, '@trustmsg/client');
  assert.equal(pkg.version, '0.1.0');
  assert.ok(readme.includes(`**\`${pkg.name}\`** (version ${pkg.version})`));
});
