'use strict';
// Copies the non-TypeScript files the compiled code reads at runtime into dist/ (run after tsc).
const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..');
const ASSETS = ['csi/csi.proto'];

for (const asset of ASSETS) {
  const from = path.join(root, asset);
  const to = path.join(root, 'dist', asset);
  fs.mkdirSync(path.dirname(to), { recursive: true });
  fs.copyFileSync(from, to);
}
