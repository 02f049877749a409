#!/usr/bin/env bash
# Build the images the Docker tests run, on a machine whose only network is the package
# registries (no container registry): the CPU sandbox image (docker/sandbox, tag
# roofline-sandbox:py311) and the application images (docker/app: web and worker).
#
#   scripts/docker_images.sh            build what is missing or changed (the engine's layer
#                                       cache makes an unchanged rebuild take seconds)
#
# The base: $ROOFLINE_IMAGE_BASE if set, else the Dockerfiles' pinned python:3.11 image when the
# engine already has it, else a Debian bookworm root made by debootstrap (its python3 is 3.11
# too) and imported as roofline-base:bookworm-<hash of its recipe>. The root's tarball is kept
# under $ROOFLINE_DOCKER_CACHE (default /var/cache/roofline/docker), so a second run, or a new
# engine on the same machine, does not make it again. The Python packages: the pinned wheels
# downloaded with this machine's pip configuration into docker/*/wheels/, installed with
# --no-index. Builds use the host's network (docker build --network host), never a bridge.
# Without an engine, or without root for debootstrap, it says so and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE="${ROOFLINE_DOCKER_CACHE:-/var/cache/roofline/docker}"
PY="${PROJECT_PY:-.venv/bin/python}"
SUITE=bookworm
PACKAGES=python3,python3-venv
MIRROR="${ROOFLINE_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
PINNED_BASE="$(sed -n 's/^ARG BASE=//p' docker/sandbox/Dockerfile)"

if ! docker info >/dev/null 2>&1; then
  echo "docker_images: no Docker engine: nothing built"
  exit 0
fi

base_image() {
  if [ -n "${ROOFLINE_IMAGE_BASE:-}" ]; then
    echo "$ROOFLINE_IMAGE_BASE"
    return
  fi
  if docker image inspect "$PINNED_BASE" >/dev/null 2>&1; then
    echo "$PINNED_BASE"
    return
  fi
  # The recipe's hash names the image and the cached root: change the recipe, get a new one.
  local recipe hash tag tarball
  recipe="debootstrap --variant=minbase --include=$PACKAGES $SUITE (apt caches removed)"
  hash="$(printf '%s' "$recipe" | sha256sum | cut -c1-12)"
  tag="roofline-base:$SUITE-$hash"
  tarball="$CACHE/$SUITE-$hash.tar"
  if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "$tag"
    return
  fi
  if [ ! -s "$tarball" ]; then
    [ "$(id -u)" = 0 ] || { echo "docker_images: debootstrap needs root" >&2; return 1; }
    command -v debootstrap >/dev/null 2>&1 || {
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    local root
    root="$(mktemp -d)"
    echo "docker_images: debootstrap $SUITE into $root (about a minute)" >&2
    debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$MIRROR" >&2
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    mkdir -p "$CACHE"
    tar -C "$root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$root"
  fi
  docker import -c 'ENV LANG=C.UTF-8' "$tarball" "$tag" >/dev/null
  echo "$tag"
}

wheels() {  # wheels DIR PIP-ARGS...: the pinned wheels for one image, from this machine's pip
  local dir="$1"
  shift
  mkdir -p "$dir"
  "$PY" -m pip download --quiet --disable-pip-version-check --only-binary=:all: -d "$dir" "$@" \
    2> >(grep -v 'is ignored: it is neither' >&2)
}

BASE="$(base_image)"
echo "docker_images: base $BASE"

wheels docker/sandbox/wheels -r docker/sandbox/requirements.txt
docker build --quiet --force-rm --network host --build-arg "BASE=$BASE" --build-arg PIP_SOURCES=--no-index \
  -t roofline-sandbox:py311 docker/sandbox >/dev/null
echo "docker_images: roofline-sandbox:py311 built"

# The build backend too (`pip install .` builds the empty project with setuptools), and what
# a Python before 3.11.3 needs besides (redis asks for async-timeout there; Debian's is 3.11.2).
wheels docker/app/wheels -c docker/app/constraints.txt . setuptools wheel async-timeout
for target in web worker; do
  docker build --quiet --force-rm --network host -f docker/app/Dockerfile --target "$target" \
    --build-arg "PYTHON_IMAGE=$BASE" --build-arg PIP_SOURCES=--no-index \
    -t "roofline-$target:test" . >/dev/null
  echo "docker_images: roofline-$target:test built"
done
# A rebuild leaves the previous image's layers untagged: drop them (dangling images only).
docker image prune --force >/dev/null
