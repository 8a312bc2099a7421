// `npm run build` step: bundles workflows/ once, for production workers (WORKFLOW_BUNDLE), so a
// worker does not run webpack at every start.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode } from '@temporalio/worker';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'dist', 'workflow-bundle.js');
const { code } = await bundleWorkflowCode({ workflowsPath: path.join(root, 'workflows', 'index.ts') });
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, code);
process.stderr.write(`workflow bundle: ${out} (${(code.length / 1024).toFixed(0)} KiB)\n`);
