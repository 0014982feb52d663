#pragma once
// The workspace's file operations for an image without python3 (sandbox_files.cpp runs the
// python3 program where the image has one, this one where it has only a POSIX sh and its
// tools: coreutils or busybox). Same operations, arguments, exit codes and records as the
// python3 program (sandbox_files.cpp `workspace_ops`), except as said here. Internal to the
// sidecar library.
//
// What differs, and why it is safe: the walk checks each directory on the way and the entry
// with `[ -L ]`/`[ -d ]`/`[ -f ]` before it acts, where the python3 program opens each with
// O_NOFOLLOW; a process in the sandbox that swaps a directory for a symlink between the
// check and the act can lead the operation through it. Every operation runs as the session
// user, so what it can then reach is what that process could reach itself: the walk keeps
// the API's paths under /workspace, it is not the sandbox's wall (the container is).
// Records carry times as seconds since the epoch (the front formats them) and end with a
// NUL in place of stat's newline, so a name holding a newline is listed wrongly. `replace`
// needs python3 (exit 11): a byte-exact replace of any text is not a job for sed.
#include <string_view>

namespace dockgate::sidecar {

constexpr std::string_view workspace_ops_sh = R"sh(
set -f
W=/workspace
end() { printf '%s' "$2" >&2; exit "$1"; }
check() {
  [ -z "$1" ] && return 0
  case "/$1/" in *//*|*/./*|*/../*) end 5 'bad path';; esac
}
# walk REL [make]: D = /workspace/REL, each step a directory, never a symlink.
walk() {
  D=$W; r=$1
  [ -L "$D" ] && end 5 'a symlink on the path'
  [ -z "$r" ] && return 0
  r=$r/
  while [ -n "$r" ]; do
    D=$D/${r%%/*}; r=${r#*/}
    if [ -n "$2" ] && [ ! -e "$D" ] && [ ! -L "$D" ]; then
      mkdir -m 755 "$D" 2>/dev/null || [ -d "$D" ] || end 10 'permission denied'
    fi
    [ -L "$D" ] && end 5 'a symlink on the path'
    [ -e "$D" ] || end 2 'not found'
    [ -d "$D" ] || end 6 'a parent is not a directory'
  done
}
# entry REL [make]: F = the entry (its parents walked), never itself followed.
entry() {
  check "$1"
  case "$1" in */*) walk "${1%/*}" "$2";; *) walk "" "$2";; esac
  F=$D/${1##*/}
}
exists() { [ -e "$F" ] || [ -L "$F" ]; }
regular() {
  exists || end 2 'not found'
  [ -L "$F" ] && end 5 'a symlink on the path'
  [ -f "$F" ] || end 3 'not a regular file'
}
mine() {
  if [ -n "$1" ] && [ "$1" != "$(id -u)" ] && [ "$1" != "$(id -un 2>/dev/null)" ]; then end 8 owner; fi
  if [ -n "$2" ] && [ "$2" != "$(id -g)" ] && [ "$2" != "$(id -gn 2>/dev/null)" ]; then end 8 group; fi
}
# directory REL: D = /workspace/REL, a directory (not a symlink), its parents walked.
directory() {
  check "$1"; F=$W${1:+/$1}
  [ -L "$F" ] && end 5 'a symlink'
  exists || end 2 'not found'
  [ -d "$F" ] || end 3 'not a directory'
  walk "$1"
}
records() { stat -c '%F	%s	%Y	%Z	%U	%G	%a	%n' "$@" | tr '\n' '\0'; }
op=$1; shift
case "$op" in
write)
  mine "$4" "$5"; entry "$1" make
  if exists; then [ -L "$F" ] && end 5 'a symlink on the path'; [ -f "$F" ] || end 3 'not a regular file'; fi
  t=$D/.dockgate-upload.$$
  head -c "$(($2 + 1))" > "$t" || { rm -f "$t"; end 10 'permission denied'; }
  if [ "$(wc -c < "$t")" -gt "$2" ]; then rm -f "$t"; end 4 'too large'; fi
  if exists; then cat "$t" > "$F"; rm -f "$t"; else mv -f "$t" "$F"; fi
  if [ "$3" != 0 ]; then chmod "$3" "$F"; fi ;;
read)
  entry "$1"; regular
  size=$(wc -c < "$F"); a=${3:-0}; b=$((size - 1))
  if [ -n "$4" ] && [ "$4" -lt "$b" ]; then b=$4; fi
  if [ -n "$3" ] && [ "$a" -ge "$size" ]; then end 9 "$size"; fi
  if [ $((b - a + 1)) -gt "$2" ]; then end 4 'too large'; fi
  printf '%d %d %d\n' "$size" "$a" "$b"
  if [ "$b" -ge "$a" ]; then tail -c "+$((a + 1))" "$F" | head -c "$((b - a + 1))"; fi ;;
lines)
  entry "$1"; regular
  t=/tmp/.dockgate-lines.$$
  if [ "$4" -lt 0 ]; then tail -n "+$3" "$F" > "$t"; else tail -n "+$3" "$F" | head -n "$4" > "$t"; fi
  if [ "$(wc -c < "$t")" -gt "$2" ]; then rm -f "$t"; end 4 'too large'; fi
  cat "$t"; rm -f "$t" ;;
info)
  for rel in "$@"; do
    entry "$rel"; [ -z "$rel" ] && F=$W; exists || end 2 'not found'; records "$F"
  done ;;
rm|rmdir)
  [ -z "$1" ] && end 3 'not /workspace itself'
  entry "$1"; exists || end 2 'not found'
  if [ -d "$F" ] && [ ! -L "$F" ]; then
    [ "$op" = rm ] && end 3 'a directory'
  else
    [ "$op" = rmdir ] && end 3 'not a directory'
  fi
  rm -rf -- "$F" 2>/dev/null || end 10 'permission denied' ;;
mkdir)
  check "$1"; walk "$1" make
  if [ "$2" != 0 ]; then chmod "$2" "$D"; fi ;;
chmod)
  mine "$3" "$4"; entry "$1"; [ -z "$1" ] && F=$W; exists || end 2 'not found'
  [ -L "$F" ] && end 5 'a symlink'
  [ -d "$F" ] || [ -f "$F" ] || end 3 'not a file or directory'
  if [ "$2" != 0 ]; then chmod "$2" "$F" || end 10 'permission denied'; fi ;;
mv)
  { [ -z "$1" ] || [ -z "$2" ]; } && end 3 'not /workspace itself'
  entry "$1"; S=$F; exists || end 2 'not found'
  entry "$2"; T=$F
  if [ -d "$T" ] && [ ! -L "$T" ]; then
    { [ -d "$S" ] && [ ! -L "$S" ] && rmdir "$T" 2>/dev/null; } || end 3 'a directory is in the way'
  fi
  mv -f -- "$S" "$T" 2>/dev/null || end 10 'permission denied' ;;
list)
  directory "$1"
  find "$D" -mindepth 1 -maxdepth "$2" | head -n "$3" | while IFS= read -r p; do records "$p"; done ;;
search)
  directory "$1"
  find "$D" ! -type d | while IFS= read -r p; do
    rel=${p#"$D"/}
    case "$2" in ''|'*'|'**') ;; */*) case "$rel" in $2) ;; *) continue;; esac;; *) case "${p##*/}" in $2) ;; *) continue;; esac;; esac
    printf '%s\n' "$p"
  done | head -n "$3" | while IFS= read -r p; do records "$p"; done ;;
replace)
  end 11 'needs python3 in the image' ;;
*)
  end 1 "unknown operation $op" ;;
esac
)sh";

}  // namespace dockgate::sidecar
