// Loaded into a gateway process with `--import`: on SIGUSR2 it writes the event loop's
// delay since the last report (perf_hooks.monitorEventLoopDelay) as one line on stderr,
// `loop-delay {"maxMs":…,"p99Ms":…}`, and starts over. It changes nothing else, so it
// measures any checkout, before a change as well as after.
import { monitorEventLoopDelay } from 'node:perf_hooks'

const delay = monitorEventLoopDelay({ resolution: 5 })
delay.enable()
process.on('SIGUSR2', () => {
  process.stderr.write(`loop-delay ${JSON.stringify({ maxMs: delay.max / 1e6, p99Ms: delay.percentile(99) / 1e6 })}\n`)
  delay.reset()
})
