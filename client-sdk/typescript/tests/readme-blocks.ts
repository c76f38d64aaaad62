// Every ```ts (or ```typescript) block of README.md, type-checked with the
// SDK's strict tsconfig against the built package: each block is a module of
// its own in .readme-check/, where `@trustmsg/client` resolves through the
// package's `exports` to dist/, as in an application. A block that no longer
// compiles fails ./test with its README line, so the README cannot drift.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SDK_DIR } from './vectors.js';

/** The fenced TypeScript blocks of `markdown`, with the README line of their first code line. */
export function typescriptBlocks(markdown: string): Array<{ line: number; code: string }> {
  const lines = markdown.split('\n');
  const found: Array<{ line: number; code: string }> = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(ts|typescript)\s*$/.exec(lines[i]!);
    if (!open) continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !/^\s*```\s*$/.test(lines[end]!)) end++;
    if (end === lines.length) throw new Error(`README.md:${i + 1}: the code block is never closed`);
    found.push({ line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return found;
}

const dir = join(SDK_DIR, '.readme-check');
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir);
const blocks = typescriptBlocks(readFileSync(join(SDK_DIR, 'README.md'), 'utf8'));
if (blocks.length === 0) throw new Error('README.md has no ```ts block: is this the right file?');
for (const b of blocks) writeFileSync(join(dir, `line-${b.line}.ts`), `${b.code}\nexport {};\n`);
writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../tsconfig.json', compilerOptions: { noEmit: true, rootDir: '..' }, include: ['*.ts'] }));
const tsc = spawnSync(process.execPath, [join(SDK_DIR, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(dir, 'tsconfig.json')], {
  encoding: 'utf8',
});
// tsc names `.readme-check/line-N.ts(l,c)`: say README.md:(N + l - 1):c.
const said = `${tsc.stdout}${tsc.stderr}`.replace(/(?:\.readme-check\/)?line-(\d+)\.ts\((\d+),(\d+)\)/g, (_m, n: string, l: string, c: string) => {
  return `README.md:${Number(n) + Number(l) - 1}:${c}`;
});
if (tsc.status !== 0) {
  process.stderr.write(said);
  process.stderr.write(`\nREADME.md: its TypeScript blocks do not compile against the built package (the files are in ${dir})\n`);
  process.exit(1);
}
rmSync(dir, { recursive: true, force: true });
console.log(`README.md: all ${blocks.length} TypeScript blocks compile against the built package`);
