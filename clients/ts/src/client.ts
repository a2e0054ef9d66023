import { Core, type ClientOptions } from "./core.js";
import { Session, type SessionOptions } from "./session.js";

/** Where the sidecar listens unless the address is given or $REBOUND_ADDR says otherwise. */
export const DEFAULT_ADDRESS = "127.0.0.1:50051";

/** The address to use when none is given: $REBOUND_ADDR (what the deploy manifests set), else DEFAULT_ADDRESS. */
function defaultAddress(): string {
  const fromEnv = process.env.REBOUND_ADDR?.trim();
  return fromEnv ? fromEnv : DEFAULT_ADDRESS;
}

/**
 * A connection to one Rebound sidecar, shared by any number of sessions.
 *
 * Creating one does not wait for the sidecar: it may start later or be down,
 * and the client decides locally until it answers, reconnecting in the
 * background. The connection is plaintext, meant for a sidecar on loopback or
 * a Unix socket in the same pod. `close()` it when the agent is done.
 */
export class Client {
  private readonly core: Core;

  /**
   * Connects to the sidecar at `addr`: `host:port` or `unix:/path/to.sock`
   * (default: $REBOUND_ADDR, else 127.0.0.1:50051). Throws InvalidInputError
   * only for a malformed address or option, never because the sidecar is down.
   */
  constructor(addr?: string, options: ClientOptions = {}) {
    this.core = new Core(addr ?? defaultAddress(), options);
  }

  /** The sidecar's address, as given. */
  get address(): string {
    return this.core.addr;
  }

  /**
   * The session named `id` (one agent run). Options, when given, are declared
   * to the sidecar (StartSession) before the session's first report.
   */
  session(id: string, options?: SessionOptions): Session {
    return new Session(this.core, id, options);
  }

  /** How many decisions the local fallback policy has made because the sidecar did not answer in time. */
  get fallbacks(): number {
    return this.core.fallbacks;
  }

  /** Closes the connection; this client's sessions must not be used afterwards. */
  close(): void {
    this.core.close();
  }
}

/** Same as `new Client(addr, options)`. */
export function connect(addr?: string, options: ClientOptions = {}): Client {
  return new Client(addr, options);
}
