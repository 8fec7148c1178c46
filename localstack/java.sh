# Finds a Java runtime of at least a given major version (sourced by install.sh and start.sh; the
# Schema Registry needs 21+ while the default `java` may be 17).
# Usage: java=$(find_java 21) || die "... (found: $java)"
# Tries JAVA_HOME's java, then the one on PATH, then /usr/lib/jvm/*/bin/java, and prints the first whose
# version is new enough; if none is, prints what it found (each path with its version) and returns 1.

java_major() { # java -> its major version (17, 21, 25; 8 for 1.8), or nothing if it does not run
  "$1" -XshowSettings:properties -version 2>&1 |
    sed -n 's/^ *java\.specification\.version = \(1\.\)\{0,1\}\([0-9][0-9]*\).*/\2/p'
}

find_java() { # min_major
  local c real v seen="" tried=" "
  for c in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java 2>/dev/null || true)" /usr/lib/jvm/*/bin/java; do
    [ -n "$c" ] && [ -x "$c" ] || continue
    real=$(readlink -f "$c")
    case "$tried" in *" $real "*) continue ;; esac
    tried="$tried$real "
    v=$(java_major "$c")
    if [ -n "$v" ] && [ "$v" -ge "$1" ]; then
      echo "$c"
      return 0
    fi
    seen="$seen${seen:+, }$c is ${v:-not runnable}"
  done
  echo "${seen:-no java at all}"
  return 1
}
