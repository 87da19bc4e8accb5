'use strict';
// Whether an ELF executable is static (no PT_INTERP program header): the small images hold no libc or loader.
const fs = require('fs');

const PT_INTERP = 3;

function isStaticElf(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.length < 64 || bytes.readUInt32BE(0) !== 0x7f454c46) throw new Error(`${file} is not an ELF file`);
  if (bytes[4] !== 2 || bytes[5] !== 1) throw new Error(`${file} is not a 64-bit little-endian ELF file`);
  const phoff = Number(bytes.readBigUInt64LE(0x20));
  const phentsize = bytes.readUInt16LE(0x36);
  const phnum = bytes.readUInt16LE(0x38);
  for (let i = 0; i < phnum; i++) if (bytes.readUInt32LE(phoff + i * phentsize) === PT_INTERP) return false;
  return true;
}

module.exports = { isStaticElf };
