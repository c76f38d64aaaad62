// Where the contract kit's vectors are: TRUSTMSG_KIT_VECTORS under the kit, else the repository's.
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** client-sdk/typescript, from .test-build/test. */
export const SDK_DIR = resolve(here, '..', '..');
export const CONFORMANCE_DIR = resolve(SDK_DIR, '..', 'conformance');

export function vectorsText(name: string): string {
  const dir = process.env['TRUSTMSG_KIT_VECTORS'] ?? join(CONFORMANCE_DIR, 'vectors');
  return readFileSync(join(dir, name), 'utf8');
}

export function vectors<T>(name: string): T {
  return JSON.parse(vectorsText(name)) as T;
}
