// The key portal's only script: the copy button of a new secret, and a confirmation before
// forms that cannot be undone. Every page works without it.
'use strict'
document.addEventListener('click', (event) => {
  const button = event.target instanceof Element ? event.target.closest('button[data-copy]') : null
  if (button === null) return
  const field = document.getElementById(button.getAttribute('data-copy') || '')
  if (!(field instanceof HTMLInputElement)) return
  const status = document.getElementById(button.getAttribute('data-copy-status') || '')
  const done = (text) => {
    if (status !== null) status.textContent = text
  }
  field.select()
  const fallback = () => {
    try {
      done(document.execCommand('copy') ? 'Copied.' : 'Select the key and copy it.')
    } catch {
      done('Select the key and copy it.')
    }
  }
  if (navigator.clipboard !== undefined)
    navigator.clipboard.writeText(field.value).then(() => done('Copied to the clipboard.'), fallback)
  else fallback()
})
document.addEventListener('submit', (event) => {
  const form = event.target
  if (!(form instanceof HTMLFormElement)) return
  const question = form.getAttribute('data-confirm')
  if (question !== null && !window.confirm(question)) event.preventDefault()
})
