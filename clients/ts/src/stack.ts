// The client's own frames, taken out of the stack traces an outcome carries:
// the sidecar shows the first frame of the caller's code as `where:`, and skips
// frames in node_modules, but a client installed from a folder (`npm install
// /path/to/clients/ts`) is a symlink there, which Node resolves: its frames
// (`HttpError.fromResponse`, `Session.run`) would read as the agent's own.

import { realpathSync } from "node:fs";
import { basename, dirname, resolve, sep } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** How the client's own files start in a stack frame, as paths and as file URLs; computed once. */
let ownPrefixes: readonly string[] | undefined;

/**
 * The client's module directory (dist/, with gen/ under it) and the `src/`
 * next to it, which frames name under `--enable-source-maps`: each as
 * given and with symlinks resolved. None when a bundler has inlined this
 * module into another file, whose directory holds the agent's code too.
 */
function prefixes(): readonly string[] {
  if (ownPrefixes !== undefined) return ownPrefixes;
  const file = fileURLToPath(import.meta.url);
  const dirs = new Set<string>();
  if (/^stack\.[cm]?[jt]s$/.test(basename(file))) {
    const here = dirname(file);
    for (const dir of [here, resolve(here, "..", "src")]) {
      dirs.add(dir);
      try {
        dirs.add(realpathSync(dir));
      } catch {
        // No such folder (src/ is not always shipped): its path as given is enough.
      }
    }
  }
  ownPrefixes = [...dirs].flatMap((dir) => [dir + sep, `${pathToFileURL(dir).href}/`]);
  return ownPrefixes;
}

/** A stack frame line: "    at f (/path/to/file.js:1:2)", "    at async /path/to/file.js:3:4". */
const FRAME = /^\s+at\s/;

/** `stack` without the frames that point into the client's own files. */
export function withoutOwnFrames(stack: string): string {
  const own = prefixes();
  if (own.length === 0) return stack;
  return stack
    .split("\n")
    .filter((line) => !(FRAME.test(line) && own.some((p) => line.includes(p))))
    .join("\n");
}
