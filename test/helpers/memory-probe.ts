// Loaded into a gateway process with `--expose-gc --import`: on SIGUSR2 it collects
// garbage (twice: the first pass leaves what finalizers free) and writes one line on
// stderr, `memory {"rss":…,"heapUsed":…,"external":…,"arrayBuffers":…}` (bytes). It
// changes nothing else. Read it with memoryOf() in test/helpers/memory.ts.
process.on('SIGUSR2', () => {
  const gc = (globalThis as { gc?: () => void }).gc
  gc?.()
  gc?.()
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage()
  process.stderr.write(`memory ${JSON.stringify({ rss, heapUsed, external, arrayBuffers, gc: gc !== undefined })}\n`)
})
