// Reading a password for the CLI: never from argv (it would show in `ps` and in shell
// history). From a terminal, a prompt that does not echo; otherwise the first line of stdin
// (`printf '%s\n' "$PW" | tollgate users add alice`).
import { stdin, stderr } from 'node:process'

const MAX_BYTES = 4096

/** Reads one password, from a no-echo prompt on a terminal or the first line of piped stdin. */
export function readPassword(prompt: string): Promise<string> {
  return stdin.isTTY ? promptHidden(prompt) : firstLine()
}

async function firstLine(): Promise<string> {
  let text = ''
  for await (const chunk of stdin) {
    text += String(chunk)
    const end = text.indexOf('\n')
    if (end !== -1) return text.slice(0, end).replace(/\r$/, '')
    if (text.length > MAX_BYTES) throw new Error('the password on stdin is too long')
  }
  return text.replace(/\r$/, '')
}

function promptHidden(prompt: string): Promise<string> {
  stderr.write(prompt)
  stdin.setRawMode(true)
  stdin.resume()
  stdin.setEncoding('utf8')
  let typed = ''
  return new Promise((done, fail) => {
    const finish = (error?: Error): void => {
      stdin.off('data', onData)
      stdin.setRawMode(false)
      stdin.pause()
      stderr.write('\n')
      if (error) fail(error)
      else done(typed)
    }
    const onData = (chunk: string): void => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return finish()
        if (ch === '\u0003') return finish(new Error('cancelled'))
        if (ch === '\u007f' || ch === '\b') typed = typed.slice(0, -1)
        else if (typed.length < MAX_BYTES) typed += ch
      }
    }
    stdin.on('data', onData)
  })
}
