// Loaded into a gateway process with `--import`: on SIGUSR2 it writes one line on stderr,
// `modules [...]`, the URLs of every module the main thread has loaded so far (a load hook
// of node:module's registerHooks sees each ES module and require), then Node's own modules
// loaded so far (process.moduleLoadList, as `node-internal:NativeModule internal/...`),
// which no hook sees. It changes nothing else.
// Read it with loadedModules() in test/runtime/lazy-modules.test.ts.
import { registerHooks } from 'node:module'
import { isMainThread } from 'node:worker_threads'

if (isMainThread) {
  const loaded: string[] = []
  registerHooks({
    load(url, context, next) {
      loaded.push(url)
      return next(url, context)
    },
  })
  process.on('SIGUSR2', () => {
    // Undocumented in @types/node, but there since Node 0.x: the list `node -p process.moduleLoadList` shows.
    const { moduleLoadList = [] } = process as { moduleLoadList?: string[] }
    const internal = moduleLoadList.map((name) => `node-internal:${name}`)
    process.stderr.write(`modules ${JSON.stringify([...loaded, ...internal])}\n`)
  })
}
