// Loaded into a gateway process with `--import`: the first SIGUSR2 starts V8's sampling heap
// profiler over every allocation (those collected since included, so it counts what was
// allocated, not what is left), the second writes the profile to $TOLLGATE_ALLOC_PROFILE.
// It changes nothing else, so it measures any checkout (bench/cpu-profile.ts --alloc).
import { writeFileSync } from 'node:fs'
import { Session } from 'node:inspector/promises'

const out = process.env.TOLLGATE_ALLOC_PROFILE
const session = new Session()
session.connect()
let sampling = false
process.on('SIGUSR2', () => {
  if (out === undefined) return
  const next = sampling
    ? session.post('HeapProfiler.stopSampling').then(({ profile }) => writeFileSync(out, JSON.stringify(profile)))
    : session.post('HeapProfiler.startSampling', {
        samplingInterval: 1024,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      })
  sampling = !sampling
  void next.then(() => process.stderr.write(`alloc-sampler ${sampling ? 'on' : 'written'}\n`))
})
