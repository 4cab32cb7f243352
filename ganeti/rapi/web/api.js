// Talking to the remote API: the session (sessionStorage "ganeti.session",
// {"token", "user", "rights"}), JSON calls with the Bearer token, errors
// carrying the API's message.

export const SESSION_KEY = "ganeti.session";

export class ApiError extends Error {
  constructor(status, body) {
    const text = body && body.message
      ? body.message + (body.explain && body.explain !== body.message
                        && status !== 401 ? ": " + body.explain : "")
      : "HTTP " + status;
    super(text);
    this.status = status;
    this.body = body;
  }
}

export function loadSession() {
  try {
    const value = JSON.parse(sessionStorage.getItem(SESSION_KEY));
    if (value && typeof value.token === "string") return value;
  } catch (e) { /* no or broken session: log in again */ }
  return null;
}

export function saveSession(session) {
  sessionStorage.setItem(SESSION_KEY, JSON.stringify(
    {token: session.token, user: session.user, rights: session.rights}));
}

export function clearSession() {
  sessionStorage.removeItem(SESSION_KEY);
}

export function canWrite(session) {
  return !!session && Array.isArray(session.rights) &&
    session.rights.includes("write");
}

// called with the error when the server says the session is gone
let onUnauthorized = () => {};
export function setUnauthorizedHandler(fn) { onUnauthorized = fn; }

export async function call(method, path, body) {
  const session = loadSession();
  const headers = {"Accept": "application/json"};
  if (session) headers["Authorization"] = "Bearer " + session.token;
  const init = {method, headers, cache: "no-store"};
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  let value = null;
  const text = await response.text();
  if (text) {
    try { value = JSON.parse(text); } catch (e) { value = null; }
  }
  if (!response.ok) {
    const err = new ApiError(response.status, value);
    if (response.status === 401 && session) onUnauthorized(err);
    throw err;
  }
  return value;
}

export const get = (path) => call("GET", path);

export async function login(username, password) {
  const response = await fetch("/2/sessions", {
    method: "POST", cache: "no-store",
    headers: {"Content-Type": "application/json", "Accept": "application/json"},
    body: JSON.stringify({username, password}),
  });
  const value = await response.json().catch(() => null);
  if (!response.ok) {
    const err = new ApiError(response.status, value);
    const retry = response.headers.get("Retry-After");
    if (retry) err.retryAfter = retry;
    throw err;
  }
  saveSession(value);
  return value;
}

export async function logout() {
  try {
    if (loadSession()) await call("DELETE", "/2/sessions");
  } catch (e) { /* ended already */ }
  clearSession();
}

export function enc(name) { return encodeURIComponent(name); }
