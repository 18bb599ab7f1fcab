# Shared by scripts/cross.sh and scripts/wheel.sh (sourced, not run): the zig
# toolchain of scripts/cross_setup.sh, the meson options of a foreign target,
# and the artifact checks of docs/PLATFORMS.md, one definition each.
#
# Needs ROOT (the source tree). Sets CACHE, TOOLS, MESON, ZIG, and writes
# $CACHE/toolchain.ini (the zig binary and SWIG for the cross files).

CACHE=$ROOT/.cache/cross
# The toolchain venv (zig, meson, SWIG) and zig's compile cache live outside
# the clone, so every clone on this machine shares them: zig builds each
# target's C runtime (mingw, glibc stubs) once, minutes for Windows.
TOOLS=${ZR_CROSS_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/loaderx-cross}
export ZR_CROSS_TOOLS=$TOOLS
ALL=(linux-x64-gnu linux-arm64-gnu linux-x64-musl linux-arm64-musl
     windows-x64 windows-arm64 macos-x64 macos-arm64)

# Our shared libraries, by base name.
LIBS=(zrerror zsampler zrengine zrstore zmrec zloader)
# Exported names allowed in our shared libraries: the prefixed APIs and the
# <lib>_version / <lib>_version_string functions.
EXPORT_OK='^_?(zre_|zrs_|zsm_|zld_|zmr_|zr_|zrerror_version|zrengine_version|zrstore_version|zsampler_version|zloader_version|zmrec_version)'
EXPORT_BAD='^_?(ZSTD_|ZDICT_|HUF_|FSE_|mdb_|json_|msgpack_|lh_|array_list_|printbuf_|_cmocka|mock_)'
# DLLs a Windows artifact may import: the system's (UCRT through its
# api-ms-win-crt-* sets, kernel32, advapi32 for json-c's seed), ours, and
# for the Python extension the stable ABI's python3.dll (never a
# version-specific python3XY.dll), and for the Lua module lua54.dll (the
# DLL of Lua's own Windows build, which the interpreter loading it provides).
DLL_OK='^(kernel32|advapi32|ntdll|bcrypt|ucrtbase|api-ms-win-[a-z0-9-]+|lib(zrerror|zsampler|zrengine|zrstore|zmrec|zloader)(-[0-9]+)?|python3|lua54)\.dll$'

# The toolchain: cross_setup.sh has installed it; name zig and SWIG for the
# cross files.
cross_toolchain() {
    mkdir -p "$CACHE"
    MESON=$TOOLS/venv/bin/meson
    ZIG=$("$TOOLS/venv/bin/python3" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
    printf "[constants]\nzig = '%s'\n[binaries]\nswig = '%s'\n" "$ZIG" "$TOOLS/venv/bin/swig" > "$CACHE/toolchain.ini"
    export ZIG_GLOBAL_CACHE_DIR=$TOOLS/zig-cache ZIG_LOCAL_CACHE_DIR=$TOOLS/zig-cache
    export WINEPREFIX=$CACHE/wine WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
    # qemu-user keeps bookkeeping for every guest mapping's pages that it
    # never frees after munmap, and places each new mapping at a new
    # address: the engine maps 4 GiB per open file, so a suite that opens
    # and closes stores grew by about 24 MiB per open (torture_fuzz peaked
    # at 14.7 GB, torture_store at 7.5 GB). A reserved guest address space
    # makes qemu reuse the freed ranges, which bounds it (measured: 300
    # opens of a 4 GiB mapping, 7.4 GB without, 37 MB with). 256 GiB holds
    # 64 such mappings at once; past that the engine reads with pread.
    export QEMU_RESERVED_VA=256G
}

# The Python of target $1 for -Dpython_cross (made once; echoes its path):
# CPython's headers with the target's pyconfig.h, numpy's headers of numpy's
# wheel for the target, and on Windows the import library of python3.dll
# made from CPython's own list of the stable ABI's exports (PC/python3dll.c).
python_cross_dir() {
    local t=$1 d=$CACHE/python/target/$1 numpy_version machine
    numpy_version=$(sed -n 's/^ *"numpy==\([0-9.]*\)".*/\1/p' "$ROOT/pyproject.toml")
    if [ "$(cat "$d/stamp" 2>/dev/null)" != "$numpy_version" ]; then
        rm -rf "$d" && mkdir -p "$d/include"
        cp -r "$CACHE/python/cpython/Include/." "$d/include/"
        case $t in
            windows-*) cp "$CACHE/python/cpython/PC/pyconfig.h" "$d/include/pyconfig.h" ;;
            *) cp /usr/include/x86_64-linux-gnu/python3.11/pyconfig.h "$d/include/pyconfig.h" ;;
        esac
        cp -r "$CACHE/python/numpy-$numpy_version/$t/numpy" "$d/numpy"
        if [[ $t == windows-* ]]; then
            { echo "LIBRARY python3.dll"; echo "EXPORTS"
              sed -n 's/^EXPORT_FUNC(\([A-Za-z0-9_]*\)).*/\1/p; s/^EXPORT_DATA(\([A-Za-z0-9_]*\)).*/\1 DATA/p' \
                  "$CACHE/python/cpython/PC/python3dll.c"; } > "$d/python3.def"
            machine=i386:x86-64
            [ "$t" = windows-arm64 ] && machine=arm64
            "$ZIG" dlltool -m "$machine" -d "$d/python3.def" -l "$d/libpython3.a" >&2
        fi
        echo "$numpy_version" > "$d/stamp"
    fi
    echo "$d"
}

# Configure (or reconfigure) the build dir of target $1,
# $CACHE/build/<target>: one build for scripts/cross.sh (libraries, zr, the
# C suites) and scripts/wheel.sh (the Python extension, and `meson install`
# in the wheel's layout: package, libraries and zr in loaderx/). The
# dependencies come from the wraps, static and hidden; our code builds with
# -Werror, theirs without.
cross_configure() {
    local t=$1 b=$CACHE/build/$1 sub pyx
    pyx=$(python_cross_dir "$t") || return 1
    # Stores at URLs need libcurl and a TLS library per target: the cross
    # builds leave them out (docs/PLATFORMS.md), and refuse URLs.
    local opts=(-Dwrap_mode=forcefallback -Dlua=enabled -Dbuildtype=release -Dwerror=true
                -Dtests=true -Dpython=enabled -Dwheel=true "-Dpython_cross=$pyx"
                -Dremote=disabled --prefix=/ --libdir=loaderx --bindir=loaderx)
    for sub in zstd msgpack-c lmdb json-c cmocka zlib lua; do opts+=(-D$sub:werror=false); done
    [ "$t" = linux-arm64-musl ] && opts+=(-Dlmdb:robust_mutex=false)
    # musl: a position-independent zr. zig links a non-PIE musl executable
    # with one copy-relocated slot for stdin/stdout/stderr, and zr's stdout
    # then went to stderr (checked: check_stdout in cross.sh).
    case $t in *-musl) opts+=(-Db_pie=true) ;; esac
    local setup=()
    [ ! -f "$b/build.ninja" ] || setup=(--reconfigure)
    # Set up when new, when a dependency's build file changed since (the
    # stamp is from cross_setup.sh), or when the options changed.
    if [ ! -f "$b/build.ninja" ] || [ "$CACHE/reconfigure" -nt "$b/build.ninja" ] ||
       [ "$(cat "$b/cross-opts" 2>/dev/null)" != "${opts[*]}" ]; then
        "$MESON" setup "${setup[@]}" "$b" --cross-file "$CACHE/toolchain.ini" --cross-file "$ROOT/cross/$t.ini" \
            "${opts[@]}" || return 1
        echo "${opts[*]}" > "$b/cross-opts"
    fi
}

file_pattern() {
    case $1 in
        linux-x64-*) echo 'ELF 64-bit LSB .*x86-64' ;;
        linux-arm64-*) echo 'ELF 64-bit LSB .*ARM aarch64' ;;
        windows-x64) echo 'PE32\+ executable .*x86-64' ;;
        windows-arm64) echo 'PE32\+ executable .*Aarch64' ;;
        macos-x64) echo 'Mach-O 64-bit .*x86_64' ;;
        macos-arm64) echo 'Mach-O 64-bit .*arm64' ;;
    esac
}

# Exported (defined, global) symbol names of shared library $2 for target $1.
exports() {
    case $1 in
        linux-*) llvm-nm -D --defined-only "$2" | awk '{print $NF}' ;;
        # (less the two symbols ld64 defines in every dylib)
        macos-*) llvm-nm -gU "$2" | awk '{print $NF}' | grep -Ev '^(___dso_handle|__mh_dylib_header)$' ;;
        windows-*) llvm-readobj --coff-exports "$2" | sed -n 's/^ *Name: //p' ;;
    esac
}

# Check one artifact of target $1: kind $2 (lib: one of our libraries, exe:
# zr or a Go program, ext: the Python extension module, lua: the Lua
# module) at path $3; $4 = installed: 1 for an
# installed file (a wheel's), whose run paths must all be relative to
# itself (a build tree's also name the build directories). Prints the
# failed checks, one a line ("check:file").
check_file() {
    local t=$1 kind=$2 f=$3 installed=${4:-0} name pat max hdr bad ex
    name=$(basename "$f")
    if [ -z "$f" ] || [ ! -f "$f" ]; then echo "missing:$kind"; return; fi
    pat=$(file_pattern "$t")
    file -bL "$f" | grep -Eq "$pat" || echo "file:$name"
    case $t in
        linux-*-gnu)
            max=$(llvm-objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
            [ -z "$max" ] || [ "$(printf '%s\n2.17\n' "$max" | sort -V | tail -1)" = 2.17 ] \
                || echo "glibc($max):$name"
            ;;
    esac
    case $t in
        linux-*)
            # Installed: run paths none, or only relative to the file itself.
            if [ "$installed" = 1 ]; then
                bad=$(llvm-readobj --dynamic-table "$f" | grep -E 'R(UN)?PATH' | grep -o '\[.*\]' | tr -d '[]' \
                      | tr ':' '\n' | grep -v '^\$ORIGIN$' | tr '\n' ' ')
                [ -z "$bad" ] || echo "rpath(${bad% }):$name"
            fi
            ;;
        macos-*)
            hdr=$(llvm-objdump --macho --private-headers "$f")
            # LC_BUILD_VERSION "minos 11.0" (or LC_VERSION_MIN_MACOSX "version 11.0").
            echo "$hdr" | grep -A4 -E 'LC_BUILD_VERSION|LC_VERSION_MIN_MACOSX' \
                | grep -Eq '^ *(minos|version) 11\.0$' || echo "minos:$name"
            if [ "$kind" = lib ]; then
                echo "$hdr" | grep -A3 'cmd LC_ID_DYLIB' | grep -Eq "name @rpath/lib[a-z]+\.[0-9]+\.dylib" \
                    || echo "install-name:$name"
            elif echo "$hdr" | grep -q 'cmd LC_ID_DYLIB'; then
                # (the extension, linked as a dylib: its own name @rpath too)
                echo "$hdr" | grep -A3 'cmd LC_ID_DYLIB' | grep -Eq "name @rpath/" || echo "install-name:$name"
            fi
            # Every dylib of ours it loads is by @rpath, and it has an rpath.
            if echo "$hdr" | grep -A3 'cmd LC_LOAD_DYLIB' | grep -E 'name .*libz' | grep -vq '@rpath/'; then
                echo "load-path:$name"
            fi
            if [ "$kind" = exe ] || echo "$hdr" | grep -A3 'cmd LC_LOAD_DYLIB' | grep -q '@rpath/'; then
                echo "$hdr" | grep -q 'cmd LC_RPATH' || echo "rpath:$name"
            fi
            # Installed: every rpath relative to the file (no build paths,
            # no $ORIGIN, no padding).
            if [ "$installed" = 1 ]; then
                bad=$(echo "$hdr" | grep -A2 'cmd LC_RPATH' | sed -n 's/^ *path \([^ ]*\).*/\1/p' \
                      | grep -v '^@loader_path\(/\.\./lib\)\?$' | tr '\n' ' ')
                [ -z "$bad" ] || echo "rpath(${bad% }):$name"
            fi
            ;;
        windows-*)
            bad=$(llvm-objdump -p "$f" | sed -n 's/^ *DLL Name: //p' | tr 'A-Z' 'a-z' | grep -Ev "$DLL_OK" | tr '\n' ' ')
            [ -z "$bad" ] || echo "imports(${bad% }):$name"
            ;;
    esac
    case $kind in
        lib)
            ex=$(exports "$t" "$f")
            [ -n "$ex" ] || echo "no-exports:$name"
            if echo "$ex" | grep -Eq "$EXPORT_BAD"; then
                echo "dep-exports:$name"
            elif [ -n "$(echo "$ex" | grep -Ev "$EXPORT_OK" | grep -v '^$')" ]; then
                echo "foreign-exports:$name"
            fi
            ;;
        ext|lua)
            # A module exports its init function and nothing else.
            local init=PyInit__zr
            [ "$kind" = lua ] && init=luaopen_zrecord
            ex=$(exports "$t" "$f")
            echo "$ex" | grep -Eq "^_?$init$" || echo "no-init($init):$name"
            ex=$(echo "$ex" | grep -Ev "^_?$init$" | grep -v '^$' | head -3 | tr '\n' ' ')
            [ -z "$ex" ] || echo "foreign-exports(${ex% }):$name"
            ;;
    esac
}

# A Mach-O file installed from a zig build keeps the run paths meson gave it
# for the build tree ($ORIGIN/... entries, padded with X's, which mean
# nothing on macOS) beside the @loader_path ones of meson.build; meson's own
# install-time fix needs Apple's install_name_tool and would also rewrite
# the @rpath install names to absolute paths. Delete every LC_RPATH of file
# $1 that is not relative to the file (@loader_path...).
macho_clean_rpaths() {
    local f=$1 rp args=()
    while IFS= read -r rp; do
        [[ $rp == @loader_path* ]] || args+=(-delete_rpath "$rp")
    done < <(llvm-objdump --macho --private-headers "$f" | grep -A2 'cmd LC_RPATH' \
             | sed -n 's/^ *path \(.*\) (offset [0-9]*)$/\1/p')
    [ ${#args[@]} -eq 0 ] || /usr/lib/llvm-14/bin/llvm-install-name-tool "${args[@]}" "$f"
}
