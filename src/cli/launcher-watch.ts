// A gateway started by npm (`npm start`, `npx tollgate serve`) ends with the npm that
// started it. npm forwards SIGINT and SIGTERM to its script, but not SIGHUP, and `npx` runs
// the command through `sh -c`, which dies of a forwarded SIGTERM without passing it on:
// either way a signal sent to the npm pid used to leave the gateway running on its own,
// still holding the data directory's lock. So the gateway notes the processes between it
// and npm (the shell, npm itself) and, when one of them is gone, drains as on SIGTERM.
// A gateway started any other way (node, bin/tollgate, a service manager) is not watched:
// its parent may leave on purpose (a shell script that starts it in the background).
import { readFileSync } from 'node:fs'

/** How often the launcher is looked for: a wrapper's end is noticed within this long. */
export const LAUNCHER_POLL_MS = 500

/** Shells npm runs a script through (`sh -c`): the launcher is the npm above them. */
const SHELLS = new Set(['sh', 'dash', 'bash', 'zsh'])

interface Link {
  readonly pid: number
  readonly ppid: number
}

/** A process's name and parent, from /proc (Linux); undefined where it cannot be read. */
function procStat(pid: number): { readonly comm: string; readonly ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read from the last ')'.
    const close = stat.lastIndexOf(')')
    const ppid = Number(stat.slice(close + 2).split(' ')[1])
    return Number.isInteger(ppid) ? { comm: stat.slice(stat.indexOf('(') + 1, close), ppid } : undefined
  } catch {
    return undefined
  }
}

/** This process and the shells above it, up to and including npm: each with the parent it has now. */
function chainToLauncher(): Link[] {
  const chain: Link[] = [{ pid: process.pid, ppid: process.ppid }]
  let parent = procStat(process.ppid)
  let pid = process.ppid
  while (parent !== undefined && SHELLS.has(parent.comm) && chain.length < 4) {
    chain.push({ pid, ppid: parent.ppid })
    pid = parent.ppid
    parent = procStat(pid)
  }
  return chain
}

/** Whether a link still stands: the process has the parent it had. */
function stands(link: Link): boolean {
  if (link.pid === process.pid) return process.ppid === link.ppid
  return procStat(link.pid)?.ppid === link.ppid
}

/**
 * Calls `gone` once when the npm that started this process, or a shell between them, has
 * ended. Does nothing unless npm started it (`npm_command` in its environment). Returns a
 * function that stops watching.
 */
export function watchLauncher(env: NodeJS.ProcessEnv, gone: (launcher: number) => void): () => void {
  if (env.npm_command === undefined || process.ppid <= 1) return () => undefined
  const chain = chainToLauncher()
  const launcher = chain.at(-1)?.ppid ?? process.ppid
  const timer = setInterval(() => {
    if (chain.every(stands)) return
    clearInterval(timer)
    gone(launcher)
  }, LAUNCHER_POLL_MS)
  timer.unref()
  return () => clearInterval(timer)
}
