// Loaded into a gateway process with `--expose-gc --import`: on SIGUSR2 it collects
// garbage and writes what is left as one line on stderr, `gc-heap {"usedMb":…,
// "externalMb":…,"rssMb":…}`: the memory the process still holds, not what it has not
// collected yet. It changes nothing else, so it measures any checkout.
const collect = (globalThis as { gc?: () => void }).gc
process.on('SIGUSR2', () => {
  collect?.()
  const m = process.memoryUsage()
  const mb = (n: number): number => Math.round(n / 1048576)
  process.stderr.write(
    `gc-heap ${JSON.stringify({ usedMb: mb(m.heapUsed), externalMb: mb(m.external + m.arrayBuffers), rssMb: mb(m.rss) })}\n`,
  )
})
