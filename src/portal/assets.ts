// The portal's stylesheet and script, served by the gateway itself (no CDN). Read on first
// request, then kept; their URLs carry a hash of the content, so they are cached for good.
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

export interface Asset {
  readonly bytes: Buffer
  readonly contentType: string
  readonly version: string
}

const FILES = { 'portal.css': 'text/css; charset=utf-8', 'portal.js': 'text/javascript; charset=utf-8' } as const
export type AssetName = keyof typeof FILES
export const ASSET_NAMES = Object.keys(FILES) as AssetName[]

const loaded = new Map<AssetName, Asset>()

export function asset(name: AssetName): Asset {
  let found = loaded.get(name)
  if (found === undefined) {
    const bytes = readFileSync(join(import.meta.dirname, 'assets', name))
    found = {
      bytes,
      contentType: FILES[name],
      version: createHash('sha256').update(bytes).digest('base64url').slice(0, 12),
    }
    loaded.set(name, found)
  }
  return found
}

export const assetUrl = (name: AssetName): string => `/portal/assets/${name}?v=${asset(name).version}`
