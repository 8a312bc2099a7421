#!/usr/bin/env node
// First step of `npm start`, `npm test` and `npm run bench` on a fresh clone. Plain Node
// with no dependencies, because it runs before `npm ci`:
//   1. installs the npm dependencies when node_modules is missing or older than the lock file;
//   2. builds every command of stack/versions.json that is missing from the cache;
//   3. with `--browser` (npm test): makes sure the real clients the tests drive are there:
//      Chromium, s3cmd and rclone, sqlite3 (the backup's copy of the stack's SQLite files), and PostgreSQL 15 for the production-shaped Temporal
//      (Debian's packages, installed when missing and apt-get may run) and the aws CLI (from PyPI into a virtualenv in the cache, AWS_CLI_VERSION);
//   4. with `--bench` (npm run bench): builds the benchComponents of versions.json too (MinIO,
//      the engine the S3 benchmark compares with), cached like the rest.
//   5. builds the web console (scripts/build-console.mjs; after step 1, it needs esbuild).
// `--binaries-only` skips steps 1 and 5; `--deps-only` skips steps 2 and 4.
//
// Why `go mod download` + `go build` rather than `go install MODULE@VERSION`: measured here,
// `go install` refuses Kubo (its go.mod has an `exclude` block) and, for FerretDB and IPFS
// Cluster, fails on the module proxy's version list it reads for the deprecation check.
// Building inside the downloaded module directory uses the module's own go.mod and go.sum.
//
// A component with a `main` (the edge's Caddy) is built from a Go module of ours instead: edge/caddy
// holds our handlers and cmd/caddy, Caddy's command with its standard modules and ours. Its go.mod
// requires Caddy's module at the version pinned here and nothing newer than Caddy's own go.mod
// asks for, so the binary has Caddy's dependencies. The build copies our module beside a copy of
// Caddy's with our patches applied, points the copy's go.mod at the patched one
// (`go mod edit -replace`, never in the repository) and runs `go build` in it.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { binDir as stackBinDir, buildName as stackBuildName, cacheDir as stackCacheDir, mainFiles } from '../stack/build-name.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'stack/versions.json'), 'utf8'));
const cacheDir = stackCacheDir();
const args = new Set(process.argv.slice(2));

function log(msg) {
  process.stderr.write(`[bootstrap] ${msg}\n`);
}

function run(cmd, cmdArgs, opts = {}) {
  const res = spawnSync(cmd, cmdArgs, { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', ...opts });
  if (res.error) throw new Error(`${cmd} could not start: ${res.error.message}`);
  if (res.status !== 0) throw new Error(`${cmd} ${cmdArgs.join(' ')} exited with ${res.status}`);
  return res.stdout;
}

function ensureDependencies() {
  const modules = path.join(root, 'node_modules');
  const marker = path.join(modules, '.package-lock.json');
  const lock = path.join(root, 'package-lock.json');
  const fresh = fs.existsSync(marker) && (!fs.existsSync(lock) || fs.statSync(marker).mtimeMs >= fs.statSync(lock).mtimeMs);
  if (fresh) return;
  // `npm ci`, as CI and the Dockerfile install: exactly the lock, refused when it disagrees
  // with package.json (the lock carries the optional platform packages of @swc/core and
  // unrs-resolver that npm 11 wants, so it is accepted as it is).
  log('installing npm dependencies (npm ci, from package-lock.json)');
  const started = Date.now();
  const res = spawnSync('npm', ['ci', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  if (res.status !== 0) throw new Error('npm could not install the dependencies');
  log(`dependencies installed in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

const binDir = (name, spec) => stackBinDir(root, name, spec);

/**
 * Our own source edits to a dependency: unified diffs in the repository, each with its reasons
 * in its preamble, applied in order. git apply runs outside any repository (the ceiling stops
 * it from finding one above the build directory), where it behaves like patch(1), which a
 * clean machine may lack; a patch that does not apply exactly fails the build.
 */
function makeWritable(dir) {
  fs.chmodSync(dir, 0o755);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) makeWritable(p);
    else if (entry.isFile()) fs.chmodSync(p, 0o644);
  }
}

function applyPatches(name, srcDir, patches) {
  for (const patch of patches) {
    run('git', ['apply', '--whitespace=nowarn', path.join(root, patch)], {
      cwd: srcDir,
      env: { ...process.env, GIT_CEILING_DIRECTORIES: path.dirname(srcDir) },
    });
    log(`  applied ${patch}`);
  }
}

function buildComponent(name, spec) {
  const out = binDir(name, spec);
  const missing = Object.keys(spec.commands).filter((cmd) => !fs.existsSync(path.join(out, cmd)));
  if (missing.length === 0) return;
  const started = Date.now();
  log(
    `building ${name} ${stackBuildName(root, spec)} (${missing.join(', ')}) from ${spec.main ? `${spec.main} and ` : ''}${spec.module}; a cold build takes minutes`,
  );
  // GOWORK=off: no go.work of the user's takes part.
  const env = { ...process.env, GOFLAGS: '-modcacherw', GOWORK: 'off', CGO_ENABLED: process.env.CGO_ENABLED ?? '0' };
  const info = JSON.parse(run('go', ['mod', 'download', '-json', `${spec.module}@${spec.version}`], { env, cwd: os.tmpdir() }));
  if (info.Error) throw new Error(`go mod download ${spec.module}: ${info.Error}`);
  let srcDir = info.Dir;
  const work = fs.mkdtempSync(path.join(cacheDir, `build-${name}-`));
  try {
    // A command that is a package of one of the module's dependencies (not ./...) needs go.sum
    // lines the module does not carry (the dependency's own dependencies): the build may add
    // them (-mod=mod), checked against the checksum database as any download is, in a copy.
    const foreign = missing.some((cmd) => !spec.commands[cmd].startsWith('.'));
    if (spec.versionFile || spec.patches || foreign) {
      // The module cache copy is read-only: version files and patches go into a writable copy.
      srcDir = path.join(work, 'src');
      fs.cpSync(info.Dir, srcDir, { recursive: true });
      makeWritable(srcDir);
    }
    if (spec.versionFile) {
      // FerretDB embeds build/version/version.txt and panics at start without it.
      fs.writeFileSync(path.join(srcDir, spec.versionFile), `${spec.version}\n`);
    }
    if (spec.patches) applyPatches(name, srcDir, spec.patches);
    // The commands are built in srcDir, or in a copy of our module that uses srcDir.
    const buildDir = spec.main ? ourModule(spec, srcDir, path.join(work, 'main'), env) : srcDir;
    const tmpOut = path.join(work, 'out');
    fs.mkdirSync(tmpOut, { recursive: true });
    for (const cmd of missing) {
      const t = Date.now();
      const mod = spec.commands[cmd].startsWith('.') ? [] : ['-mod=mod'];
      run('go', ['build', ...mod, '-trimpath', '-o', path.join(tmpOut, cmd), spec.commands[cmd]], {
        cwd: buildDir,
        env,
        stdio: ['ignore', 'inherit', 'inherit'],
      });
      log(`  ${cmd} built in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    }
    fs.mkdirSync(out, { recursive: true });
    // Rename into place last, so an interrupted build never leaves a half-written binary.
    for (const cmd of missing) fs.renameSync(path.join(tmpOut, cmd), path.join(out, cmd));
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  log(`${name} ready in ${((Date.now() - started) / 1000).toFixed(0)} s`);
}

/**
 * Copies our Go module spec.main (its mainFiles) to buildDir and makes the copy use srcDir, the
 * (patched) copy of spec.module: `replace spec.module => srcDir`, by a path relative to the copy
 * (the binary records it: `caddy version`), the same in every build. Its go.mod must require
 * spec.module at the version of versions.json.
 */
function ourModule(spec, srcDir, buildDir, env) {
  const from = path.join(root, spec.main);
  for (const file of mainFiles(from)) {
    fs.mkdirSync(path.dirname(path.join(buildDir, file)), { recursive: true });
    fs.copyFileSync(path.join(from, file), path.join(buildDir, file));
  }
  const goMod = JSON.parse(run('go', ['mod', 'edit', '-json'], { cwd: buildDir, env }));
  const required = goMod.Require?.find((r) => r.Path === spec.module)?.Version;
  if (required !== spec.version) {
    throw new Error(`${spec.main}/go.mod requires ${spec.module} ${required ?? '(not at all)'}; stack/versions.json says ${spec.version}`);
  }
  const target = path.dirname(srcDir) === path.dirname(buildDir) ? `../${path.basename(srcDir)}` : srcDir;
  run('go', ['mod', 'edit', `-replace=${spec.module}=${target}`], { cwd: buildDir, env });
  log(`  building ${spec.main} with ${spec.module} replaced by ${spec.patches?.length ? 'the patched copy' : 'its module'}`);
  return buildDir;
}

function ensureBinaries(components) {
  fs.mkdirSync(cacheDir, { recursive: true });
  for (const [name, spec] of Object.entries(components)) if (!name.startsWith('$')) buildComponent(name, spec);
}

/** The browser the tests drive (tests/support/browser.ts finds it the same way). */
function chromiumPath() {
  return process.env.CHROMIUM_PATH || ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
}

/** Debian packages the tests drive, by the command each provides. */
const DEBIAN_CLIENTS = { chromium: 'chromium', s3cmd: 's3cmd', rclone: 'rclone', sqlite3: 'sqlite3' };
/** The aws CLI the S3 tests drive (tests/support/s3-clients.ts finds it in the cache). */
const AWS_CLI_VERSION = '1.46.3';

const hasCommand = (name) => spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;

/**
 * The tests drive real clients: a Chromium (playwright-core; its own download needs the
 * internet), s3cmd, rclone and the aws CLI. Debian's packages are installed when absent and we
 * may (root, apt-get present); the aws CLI goes into a virtualenv in the cache from PyPI.
 * Otherwise the tests that need one fail saying what to install.
 */
function ensureTestClients() {
  const missing = Object.entries(DEBIAN_CLIENTS)
    .filter(([command]) => (command === 'chromium' ? !chromiumPath() : !hasCommand(command)))
    .map(([, pkg]) => pkg);
  // The production-shaped Temporal's database (stack/postgres.ts), which its tests start.
  if (!fs.existsSync(path.join(process.env.STACK_POSTGRES_BIN || '/usr/lib/postgresql/15/bin', 'postgres'))) missing.push('postgresql-15');
  if (missing.length > 0) {
    const canInstall = process.getuid?.() === 0 && spawnSync('apt-get', ['--version'], { stdio: 'ignore' }).status === 0;
    if (!canInstall) {
      log(`missing ${missing.join(', ')}: install them (Debian: apt-get install ${missing.join(' ')}); the client tests need them`);
    } else {
      log(`installing Debian's ${missing.join(', ')} for the client tests (apt-get; about a minute)`);
      const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
      run('apt-get', ['update', '-q'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      run('apt-get', ['install', '-y', '-q', ...missing], { env, stdio: ['ignore', 'ignore', 'inherit'] });
    }
  }
  const venv = path.join(cacheDir, `awscli-${AWS_CLI_VERSION}`);
  if (!fs.existsSync(path.join(venv, 'bin', 'aws'))) {
    log(`installing the aws CLI ${AWS_CLI_VERSION} into ${venv} (pip)`);
    fs.rmSync(venv, { recursive: true, force: true });
    run('python3', ['-m', 'venv', venv], { stdio: ['ignore', 'ignore', 'inherit'] });
    run(path.join(venv, 'bin', 'pip'), ['install', '-q', `awscli==${AWS_CLI_VERSION}`], { stdio: ['ignore', 'ignore', 'inherit'] });
  }
}

try {
  if (!args.has('--binaries-only')) ensureDependencies();
  if (!args.has('--binaries-only')) run(process.execPath, [path.join(root, 'scripts/build-console.mjs')], { stdio: 'inherit' });
  if (!args.has('--deps-only')) ensureBinaries(manifest.components);
  if (!args.has('--deps-only') && args.has('--bench')) ensureBinaries(manifest.benchComponents);
  if (args.has('--browser')) ensureTestClients();
} catch (err) {
  log(`failed: ${err.message}`);
  process.exit(1);
}
