#!/bin/sh
# A harness for murmur_wsgi's process transport in plain POSIX sh: it upper-cases the text.
#
#   inference: {transport: process}
#   agent: {process: [sh, examples/harness_upper.sh]}
#
# The door writes one compact JSON line, keys in a fixed order and every
# character outside ASCII escaped: {"type":"task",...,"text":"...","session":{...}}.
# awk finds the text value, drops the untrusted fence around an untrusted
# task's text, upper-cases it (an escape such as \n or \u00e9 is copied as it
# is) and prints the response line. Only sh, awk and printf.
LC_ALL=C
export LC_ALL

IFS= read -r line || exit 1
case $line in
  '{"type":"task"'*) ;;
  *) printf '%s\n' '{"type":"fail","message":"expected a task line first"}'; exit 1 ;;
esac
printf '{"type":"session","id":"upper-sh-%s"}\n' "$$"
printf '%s\n' "$line" | awk '
{
  key = "\"text\":\""
  start = index($0, key)
  if (start == 0) { print "{\"type\":\"fail\",\"message\":\"the task has no text\"}"; exit }
  rest = substr($0, start + length(key))
  text = ""
  n = length(rest)
  for (i = 1; i <= n; i++) {
    c = substr(rest, i, 1)
    if (c == "\\") { text = text c substr(rest, i + 1, 1); i++; continue }
    if (c == "\"") break
    text = text c
  }
  # An untrusted task arrives fenced: <untrusted-content ...>\n ... \n</untrusted-content>
  if (text ~ /^<untrusted-content[^>]*>\\n/ && text ~ /\\n<\/untrusted-content>$/) {
    sub(/^<untrusted-content[^>]*>\\n/, "", text)
    sub(/\\n<\/untrusted-content>$/, "", text)
  }
  out = ""
  n = length(text)
  for (i = 1; i <= n; i++) {
    c = substr(text, i, 1)
    if (c == "\\") { out = out c substr(text, i + 1, 1); i++; continue }
    out = out toupper(c)
  }
  printf "{\"type\":\"response\",\"text\":\"%s\"}\n", out
}'
