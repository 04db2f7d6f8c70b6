#!/usr/bin/env bash
# atk_install_test.sh BUILD_DIR — installs the runtime library from an
# existing build into a temporary prefix (cmake --install, component atk),
# then builds and runs tests/atk_consumer/consumer.c twice: with the flags
# `pkg-config --cflags --libs atk` prints, and through find_package(atk)
# (shared and static targets), and tests/atk_consumer/table_only.c against
# the static library without SQLite. Ends with the tinytest line.
set -u
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d /tmp/atk_install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # NAME COMMAND...
  local name=$1; shift
  if "$@" >"$tmp/log" 2>&1; then echo "  ok   $name"; pass=$((pass + 1))
  else echo "  FAIL $name"; sed 's/^/    /' "$tmp/log" | tail -20; fail=$((fail + 1)); fi
}
check install cmake --install "$build" --prefix "$tmp/prefix" --component atk
check installed_files test -f "$tmp/prefix/include/atk.h" -a -f "$tmp/prefix/lib/libatk.a" \
  -a -f "$tmp/prefix/lib/libatk.so" -a -f "$tmp/prefix/lib/pkgconfig/atk.pc" \
  -a -f "$tmp/prefix/lib/cmake/atk/atkConfig.cmake"
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
check pkg_config sh -c "cc -std=c11 -Wall -Werror '$src/tests/atk_consumer/consumer.c' \
  \$(pkg-config --cflags --libs atk) -o '$tmp/c_pkg' && '$tmp/c_pkg'"
check find_package sh -c "cmake -S '$src/tests/atk_consumer' -B '$tmp/cb' -DCMAKE_PREFIX_PATH='$tmp/prefix' \
  -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build '$tmp/cb' >/dev/null && \
  '$tmp/cb/consumer_shared' && '$tmp/cb/consumer_static'"
# the static library without SQLite: an engine using only compiled tables
cudalib=$(sed -n 's/^Libs.private: -L\([^ ]*\).*/\1/p' "$tmp/prefix/lib/pkgconfig/atk.pc")
check static_without_sqlite sh -c "cc -std=c11 -Wall -Werror -I'$tmp/prefix/include' \
  '$src/tests/atk_consumer/table_only.c' '$tmp/prefix/lib/libatk.a' -L'$cudalib' -Wl,-rpath,'$cudalib' \
  -lcublas -lnvrtc -ldl -lpthread -lm -o '$tmp/c_table' && '$tmp/c_table'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
