#!/usr/bin/env bash
# `npm pack` makes a package that a fresh project installs, imports (every
# subpath) and type-checks against. Run by ./test with the built dist/.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$here"
# dist/ is built already: no prepack build again.
tarball="$(npm pack --silent --ignore-scripts --pack-destination "$work" | tail -n 1)"
mkdir "$work/app"
cd "$work/app"
printf 'omit-lockfile-registry-resolved=true\nfund=false\naudit=false\n' > .npmrc
cat > package.json <<'JSON'
{ "name": "fresh-app", "version": "1.0.0", "private": true, "type": "module" }
JSON
npm install --silent --prefer-offline --no-audit --no-fund "$work/$tarball"
# The optional peers the subpaths load, from the SDK's own node_modules.
mkdir -p node_modules/@platformatic
for dep in mysql2 pg fastify drizzle-orm kysely typeorm; do ln -s "$here/node_modules/$dep" "node_modules/$dep"; done
ln -s "$here/node_modules/@platformatic/kafka" node_modules/@platformatic/kafka
cat > smoke.mjs <<'JS'
import { Producer, verifyCheckBack, signCheckBack, VERSION, ConflictError, TrustmsgError } from '@trustmsg/client';
import * as mysql from '@trustmsg/client/mysql';
import * as postgres from '@trustmsg/client/postgres';
import { checkBackExpress } from '@trustmsg/client/express';
import { checkBackFastify } from '@trustmsg/client/fastify';
import { Submitter } from '@trustmsg/client/kafka';
import { forPrisma } from '@trustmsg/client/prisma';
import { forDrizzle } from '@trustmsg/client/drizzle';
import { forKysely } from '@trustmsg/client/kysely';
import { forTypeorm } from '@trustmsg/client/typeorm';
const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const ts = Math.floor(Date.now() / 1000);
verifyCheckBack(secret, { 'webhook-id': 'x', 'webhook-timestamp': String(ts), 'webhook-signature': signCheckBack(secret, 'x', ts, '{}') }, '{}');
new Producer({ baseURL: 'http://127.0.0.1:8080', bizId: 'shop', token: 't' });
if (VERSION !== '0.1.0' || !(new ConflictError(409, 'c', 'm') instanceof TrustmsgError)) throw new Error('bad exports');
for (const f of [mysql.transaction, postgres.transaction, checkBackExpress, checkBackFastify, Submitter, forPrisma, forDrizzle, forKysely, forTypeorm]) if (typeof f !== 'function') throw new Error('missing export');
console.log('pack smoke: the packed package installs and imports');
JS
node smoke.mjs
cat > check.ts <<'TS'
import { Producer, type MessageView, type TransactionResult } from '@trustmsg/client';
const p: Producer = new Producer({ baseURL: 'http://127.0.0.1:8080', bizId: 'shop', token: 't' });
export const r: Promise<TransactionResult<number, MessageView>> = p.transaction({ message_key: 'k', topic: 't', payload: 'x' }, async () => 1);
TS
"$here/node_modules/.bin/tsc" --noEmit --strict --module nodenext --moduleResolution nodenext --types node --typeRoots "$here/node_modules/@types" --skipLibCheck check.ts
echo 'pack smoke: its types check in a strict NodeNext project'
