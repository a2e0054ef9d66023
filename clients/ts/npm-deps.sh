# Sourced by test.sh and generate.sh: installs the pinned npm dependencies
# (package-lock.json) with npm ci, unless node_modules already holds exactly
# that lockfile's install.
#
# --ignore-scripts: no dependency needs an install script, and the package's own
# prepare (the build) must not run here: generate.sh has to work while src/gen
# is being replaced, and test.sh builds as a step of its own.

install_npm_deps() {
  local stamp="node_modules/.rebound-lock.sha256" want
  want="$(sha256sum package-lock.json | cut -d' ' -f1)"
  if [[ "$(cat "$stamp" 2>/dev/null)" == "$want" ]]; then
    return 0
  fi
  echo "== npm ci"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  echo "$want" >"$stamp"
}
