#!/usr/bin/env bash
# Fetch the source tarballs the subprojects/ wraps name, each checked
# against its wrap's source_hash: into subprojects/packagecache/ for a wrap
# with a source_url (meson finds it there and does not download), into
# subprojects/packagefiles/ for one without (where meson looks then).
#
#   bash scripts/dep_sources.sh            every wrap
#   bash scripts/dep_sources.sh lmdb ...   the named wraps only
#
# A wrap says where its tarball comes from in a comment:
#   # debian-source-package = NAME   `apt-get source --download-only NAME`
#                                    (needs a deb-src entry: scripts/cross_setup.sh)
#   # pypi-sdist = NAME==VERSION     `pip download --no-binary :all:` with $PYTHON
#                                    (default python3)
# Safe to run again: a tarball already there with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
CACHE=.cache/depsrc
mkdir -p subprojects/packagecache "$CACHE"
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for w in subprojects/*.wrap; do names+=("$(basename "$w" .wrap)"); done
fi
for name in "${names[@]}"; do
    wrap=subprojects/$name.wrap
    [ -f "$wrap" ] || { echo "dep-sources: no wrap $wrap" >&2; exit 2; }
    file=$(sed -n 's/^source_filename *= *//p' "$wrap")
    hash=$(sed -n 's/^source_hash *= *//p' "$wrap")
    [ -n "$file" ] || continue
    dest=subprojects/packagecache/$file
    grep -q '^source_url *=' "$wrap" || dest=subprojects/packagefiles/$file
    if [ -f "$dest" ] && echo "$hash  $dest" | sha256sum -c --quiet - 2>/dev/null; then
        continue
    fi
    debsrc=$(sed -n 's/^# debian-source-package *= *//p' "$wrap")
    sdist=$(sed -n 's/^# pypi-sdist *= *//p' "$wrap")
    rm -rf "$CACHE/$name"
    mkdir -p "$CACHE/$name"
    if [ -n "$sdist" ]; then
        echo "dep-sources: pip download $sdist"
        "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
            -d "$CACHE/$name" "$sdist" >/dev/null
    elif [ -n "$debsrc" ]; then
        echo "dep-sources: apt-get source $debsrc"
        (cd "$CACHE/$name" && apt-get -qq source --download-only "$debsrc" >/dev/null)
    else
        echo "dep-sources: $wrap names no source (debian-source-package or pypi-sdist)" >&2
        exit 1
    fi
    cp "$CACHE/$name/$file" "$dest"
    if ! echo "$hash  $dest" | sha256sum -c --quiet -; then
        echo "dep-sources: $dest does not match the hash in $wrap" >&2
        rm -f "$dest"
        exit 1
    fi
done
# Meson copies packagefiles/<name>/ into the extracted source only once; when
# a build file written here has changed since, remove the extraction so meson
# extracts it again, and leave a stamp for scripts/cross.sh to reconfigure.
for name in "${names[@]}"; do
    wrap=subprojects/$name.wrap
    dir=subprojects/$(sed -n 's/^directory *= *//p' "$wrap")
    patch=subprojects/packagefiles/$(sed -n 's/^patch_directory *= *//p' "$wrap")
    [ -d "$dir" ] && [ -d "$patch" ] || continue
    stale=""
    while IFS= read -r f; do
        cmp -s "$patch/$f" "$dir/$f" || stale=1
    done < <(cd "$patch" && find . -type f)
    if [ -n "$stale" ]; then
        echo "dep-sources: $dir is older than $patch; extracting it again"
        rm -rf "$dir"
        mkdir -p .cache/cross
        touch .cache/cross/reconfigure
    fi
done
