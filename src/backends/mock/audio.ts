// POST /audio/transcriptions and /audio/translations (multipart: `file`, `model`). The
// mock does not listen to the audio: it says what it received. Audio length is inferred
// from the upload size at a fixed bitrate, and audio tokens from that length, so usage
// is deterministic for a given file.
import { countTextTokens } from '../../tokenizer/tokens.ts'
import type { UpstreamRequest, UpstreamResponse } from '../port.ts'
import type { MockContext } from './context.ts'
import { invalidRequest, missingParameter } from './errors.ts'
import { formBody, modelOf, optionalBoolean, optionalEnum } from './params.ts'
import { jsonResponse, textResponse } from './reply.ts'
import { DONE_FRAME, dataFrame, type Frame } from './sse.ts'

/** 128 kbit/s, a common bitrate for compressed speech. */
export const AUDIO_BYTES_PER_SECOND = 16_000
export const AUDIO_TOKENS_PER_SECOND = 10

const FORMATS = ['json', 'text', 'srt', 'verbose_json', 'vtt'] as const

export type AudioTask = 'transcribe' | 'translate'

export function transcriptions(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  return answer('transcribe', request, ctx)
}

export function translations(request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  return answer('translate', request, ctx)
}

async function answer(task: AudioTask, request: UpstreamRequest, ctx: MockContext): Promise<UpstreamResponse> {
  const form = formBody(request)
  const file = form.files.find((f) => f.field === 'file')
  if (file === undefined) throw missingParameter('file')
  modelOf(form.fields, request)
  const format = optionalEnum(form.fields, 'response_format', FORMATS) ?? 'json'
  const stream = optionalBoolean(form.fields, 'stream') ?? false

  const text =
    task === 'transcribe'
      ? `This is Tollgate's mock transcription of an audio file of ${file.size} bytes.`
      : `This is Tollgate's mock translation into English of an audio file of ${file.size} bytes.`
  const seconds = file.size / AUDIO_BYTES_PER_SECOND
  const audioTokens = Math.max(1, Math.ceil(seconds * AUDIO_TOKENS_PER_SECOND))
  const textTokens = await countTextTokens(form.fields.prompt ?? '')
  const outputTokens = await countTextTokens(text)
  const usage = {
    type: 'tokens',
    input_tokens: audioTokens + textTokens,
    input_token_details: { text_tokens: textTokens, audio_tokens: audioTokens },
    output_tokens: outputTokens,
    total_tokens: audioTokens + textTokens + outputTokens,
  }

  if (stream) {
    if (task === 'translate' || (format !== 'json' && format !== 'text')) {
      throw invalidRequest(
        "Streaming is only available for transcriptions with response_format 'json' or 'text'.",
        'stream',
      )
    }
    return ctx.stream(transcriptEvents(text, usage), request.signal)
  }
  switch (format) {
    case 'json':
      return jsonResponse(200, { text, usage })
    case 'text':
      return textResponse(`${text}\n`)
    case 'srt':
      return textResponse(`1\n${timestamp(0, ',')} --> ${timestamp(seconds, ',')}\n${text}\n\n`)
    case 'vtt':
      return textResponse(`WEBVTT\n\n${timestamp(0, '.')} --> ${timestamp(seconds, '.')}\n${text}\n\n`)
    case 'verbose_json':
      return jsonResponse(200, {
        task,
        language: 'english',
        duration: seconds,
        text,
        segments: [
          {
            id: 0,
            seek: 0,
            start: 0,
            end: seconds,
            text: ` ${text}`,
            tokens: [],
            temperature: 0,
            avg_logprob: 0,
            compression_ratio: 1,
            no_speech_prob: 0,
          },
        ],
        // verbose_json reports duration usage, as OpenAI's whisper-1 does.
        usage: { type: 'duration', seconds: Math.ceil(seconds) },
      })
  }
}

/** One delta per word, then the whole text with usage, then [DONE] as on the chat stream. */
function* transcriptEvents(text: string, usage: Record<string, unknown>): Generator<Frame> {
  for (const delta of text.match(/\s*\S+/g) ?? []) yield dataFrame({ type: 'transcript.text.delta', delta }, true)
  yield dataFrame({ type: 'transcript.text.done', text, usage })
  yield DONE_FRAME
}

/** 00:00:01,250 (SubRip) or 00:00:01.250 (WebVTT). */
function timestamp(seconds: number, separator: ',' | '.'): string {
  const ms = Math.round(seconds * 1000)
  const pad = (value: number, width = 2): string => String(value).padStart(width, '0')
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}${separator}${pad(ms % 1000, 3)}`
}
