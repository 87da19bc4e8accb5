'use strict';
// Copies the non-TypeScript files the compiled code reads at runtime into dist/ (run after tsc).
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
/** Also inputs of the build for scripts/build-inputs.js: a change to one rebuilds. */
const ASSETS = ['csi/csi.proto', 'agent/pluginregistration.proto'];

function copyAssets() {
  for (const asset of ASSETS) {
    const from = path.join(root, asset);
    const to = path.join(root, 'dist', asset);
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.copyFileSync(from, to);
  }
}

module.exports = { ASSETS };
if (require.main === module) copyAssets();
