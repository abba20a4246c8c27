// node:http for the gateway's own modules, read without an ES module import. Importing it
// (`import … from 'node:http'`) has Node read every one of its exports to build the
// module's namespace, and three of them (WebSocket, CloseEvent, MessageEvent) are getters
// that load undici, Node's fetch: about 3 MB of heap and more of RSS, held for good, that
// the gateway never uses. process.getBuiltinModule hands over the module itself, whose
// getters stay unread. Types still come from `import type … from 'node:http'`.
// test/runtime/lazy-modules.test.ts checks that undici stays unloaded.
export const http = process.getBuiltinModule('node:http')
