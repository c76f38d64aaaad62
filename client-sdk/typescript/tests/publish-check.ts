// What `npm publish` would upload, checked without publishing: runs
// `npm publish --dry-run` and holds that the tarball has every `exports`
// entry's code and types (and a .d.ts beside every .js), nothing but dist/,
// README.md and package.json, and that `engines.node` asks for no Node the
// dependencies refuse: every peer the subpaths load, and every package their
// own dependencies pull in, must accept each Node our range accepts.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import semver from 'semver';
import { SDK_DIR } from './vectors.js';

interface Manifest {
  name: string;
  version: string;
  engines?: { node?: string };
  exports?: Record<string, string | { types?: string; default?: string }>;
  dependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
}

const problems: string[] = [];
const pkg = JSON.parse(readFileSync(join(SDK_DIR, 'package.json'), 'utf8')) as Manifest;

// 1. The tarball.
const run = spawnSync('npm', ['publish', '--dry-run', '--ignore-scripts', '--json'], { cwd: SDK_DIR, encoding: 'utf8' });
if (run.status !== 0) throw new Error(`npm publish --dry-run failed (${run.status}):\n${run.stderr}`);
const report = JSON.parse(run.stdout) as Record<string, { files: Array<{ path: string }> } | undefined>;
const entry = report[pkg.name] ?? (report as unknown as { files: Array<{ path: string }> });
const files = new Set(entry.files.map((f) => f.path));
for (const [subpath, target] of Object.entries(pkg.exports ?? {})) {
  if (typeof target === 'string') {
    if (!files.has(target.replace(/^\.\//, ''))) problems.push(`exports ${subpath}: ${target} is not in the tarball`);
    continue;
  }
  if (!target.types) problems.push(`exports ${subpath}: no types`);
  for (const f of [target.types, target.default]) {
    if (f !== undefined && !files.has(f.replace(/^\.\//, ''))) problems.push(`exports ${subpath}: ${f} is not in the tarball`);
  }
}
for (const f of files) {
  if (f.endsWith('.js') && !files.has(f.replace(/\.js$/, '.d.ts'))) problems.push(`${f} has no .d.ts beside it`);
  if (!/^(dist\/|README\.md$|package\.json$)/.test(f)) problems.push(`${f} should not be published`);
}

// 2. engines.node against the dependencies' own engines.
const ours = pkg.engines?.node;
if (!ours || semver.validRange(ours) === null) problems.push(`engines.node ${JSON.stringify(ours)} is not a range`);
const seen = new Map<string, string>();
function visit(name: string, fromDir: string, via: string): void {
  let manifestPath: string;
  try {
    manifestPath = createRequire(join(fromDir, 'package.json')).resolve(`${name}/package.json`);
  } catch {
    // Packages that hide package.json behind `exports`: look beside the nearest node_modules.
    let dir = fromDir;
    for (;;) {
      const candidate = join(dir, 'node_modules', name, 'package.json');
      if (existsSync(candidate)) {
        manifestPath = candidate;
        break;
      }
      const up = dirname(dir);
      if (up === dir) {
        problems.push(`${via} → ${name}: not installed, so its engines cannot be checked`);
        return;
      }
      dir = up;
    }
  }
  if (seen.has(manifestPath)) return;
  const m = JSON.parse(readFileSync(manifestPath, 'utf8')) as Manifest;
  seen.set(manifestPath, `${m.name}@${m.version}`);
  const theirs = m.engines?.node;
  if (ours && theirs && semver.validRange(theirs) !== null && !semver.subset(ours, theirs)) {
    problems.push(`engines.node ${ours} admits Node versions ${via} → ${m.name}@${m.version} refuses (it asks ${theirs})`);
  }
  for (const dep of Object.keys(m.dependencies ?? {})) visit(dep, dirname(manifestPath), `${via} → ${m.name}`);
}
for (const peer of Object.keys(pkg.peerDependencies ?? {})) visit(peer, SDK_DIR, pkg.name);

if (problems.length > 0) {
  console.error(`publish check: ${problems.length} problem(s)\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  process.exit(1);
}
console.log(`publish check: npm publish --dry-run packs ${files.size} files, types for every export; engines.node ${ours} agrees with ${seen.size} packages`);
