// Tokenize texts with GPT-2's BPE (npm package gpt-3-encoder), run by
// bench/prepare.py: stdin holds texts separated by NUL bytes; stdout gets,
// per text, a little-endian uint32 token count followed by that many
// uint32 token ids. The module is resolved from NODE_PATH (a cache
// directory outside the repository).
const { encode } = require('gpt-3-encoder');

const chunks = [];
process.stdin.on('data', (c) => chunks.push(c));
process.stdin.on('end', () => {
  const texts = Buffer.concat(chunks).toString('utf8').split('\0');
  const parts = [];
  for (const t of texts) {
    if (t.length === 0) continue;
    const ids = encode(t);
    const out = Buffer.alloc(4 * (ids.length + 1));
    out.writeUInt32LE(ids.length, 0);
    for (let i = 0; i < ids.length; i++) out.writeUInt32LE(ids[i], 4 * (i + 1));
    parts.push(out);
  }
  process.stdout.write(Buffer.concat(parts));
});
