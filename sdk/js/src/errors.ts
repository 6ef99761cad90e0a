/**
 * The one error type of the SDK. A non-2xx answer carries the server's
 * `{"error":{"code","reason","description"}}` and its `X-Request-Id`; a request that got no
 * answer at all (DNS, connection refused, TLS, an abort) has `status` 0.
 */
export class ApplianceError extends Error {
  /** The HTTP status, or 0 when no response arrived. */
  readonly status: number;
  /** `error.code` of the body (the status repeated), or the status when the body had none. */
  readonly code: number;
  /** `error.reason`, the status's reason phrase (e.g. "Forbidden"; "Network Error" for status 0). */
  readonly reason: string;
  /** `error.description`: one sentence from the server saying what was wrong. */
  readonly description: string;
  /** The response's `X-Request-Id`, which the server's log lines carry too. */
  readonly requestId?: string;
  /** The method and path called, e.g. `POST /core/v1/add_group`. */
  readonly operation?: string;

  constructor(init: {
    status: number;
    code?: number;
    reason: string;
    description: string;
    requestId?: string;
    operation?: string;
    cause?: unknown;
  }) {
    const where = init.operation ? `${init.operation}: ` : "";
    const id = init.requestId ? ` (request id ${init.requestId})` : "";
    const head = init.status === 0 ? init.reason : `${init.status} ${init.reason}`;
    super(`${where}${head}: ${init.description}${id}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = "ApplianceError";
    this.status = init.status;
    this.code = init.code ?? init.status;
    this.reason = init.reason;
    this.description = init.description;
    if (init.requestId !== undefined) this.requestId = init.requestId;
    if (init.operation !== undefined) this.operation = init.operation;
  }
}

/** Whether `value` is the server's error body. */
function isErrorBody(value: unknown): value is { error: { code: number; reason: string; description: string } } {
  if (typeof value !== "object" || value === null) return false;
  const error = (value as { error?: unknown }).error;
  if (typeof error !== "object" || error === null) return false;
  const e = error as Record<string, unknown>;
  return typeof e.code === "number" && typeof e.reason === "string" && typeof e.description === "string";
}

/** The most text of an unexpected body an error message shows. */
const MAX_BODY_TEXT = 300;

/**
 * The error for a non-2xx `response` whose body was already read (`body`: parsed JSON, or
 * the text when it was not JSON).
 */
export function errorFromResponse(response: Response, body: unknown, operation?: string): ApplianceError {
  const requestId = response.headers.get("x-request-id") ?? undefined;
  if (isErrorBody(body)) {
    return new ApplianceError({
      status: response.status,
      code: body.error.code,
      reason: body.error.reason,
      description: body.error.description,
      ...(requestId !== undefined && { requestId }),
      ...(operation !== undefined && { operation }),
    });
  }
  // Not the appliance's error shape: a proxy, a load balancer or something else answered.
  let text = typeof body === "string" ? body : body === undefined || body === null ? "" : JSON.stringify(body);
  text = text.trim();
  if (text.length > MAX_BODY_TEXT) text = `${text.slice(0, MAX_BODY_TEXT)}…`;
  return new ApplianceError({
    status: response.status,
    reason: response.statusText || `HTTP ${response.status}`,
    description: text
      ? `the response is not the appliance's error body (is the base URL right?): ${text}`
      : "the response has no body (is the base URL right?)",
    ...(requestId !== undefined && { requestId }),
    ...(operation !== undefined && { operation }),
  });
}

/** The error for a request that got no response (`cause` is what fetch threw). */
export function networkError(cause: unknown, url: string, operation?: string): ApplianceError {
  const aborted = typeof cause === "object" && cause !== null && (cause as { name?: unknown }).name === "AbortError";
  const message = cause instanceof Error ? cause.message : String(cause);
  // Node's fetch says only "fetch failed"; the reason (ECONNREFUSED, a certificate error) is
  // its cause.
  const inner = cause instanceof Error ? (cause.cause as { code?: unknown; message?: unknown } | undefined) : undefined;
  const detail = inner
    ? [inner.code, inner.message].filter((part) => typeof part === "string" && part).join(": ")
    : "";
  const certificate = /CERT|certificate|SSL|TLS/i.test(`${message} ${detail}`)
    ? " The server's TLS certificate is not trusted here: in node, point NODE_EXTRA_CA_CERTS at the appliance's certificate (a development stack's is .appliance-dev/tls/self-signed.pem)."
    : "";
  return new ApplianceError({
    status: 0,
    code: 0,
    reason: aborted ? "Aborted" : "Network Error",
    description: aborted
      ? `the request to ${url} was aborted`
      : `no response from ${url}: ${message}${detail ? ` (${detail})` : ""}.${certificate}`,
    ...(operation !== undefined && { operation }),
    cause,
  });
}
