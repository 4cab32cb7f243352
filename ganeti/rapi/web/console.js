// The serial console of a kvm instance in the browser: console.html?instance=NAME
//
// The page opens a session through RAPI (POST /2/instances/NAME/console/
// sessions), shows the output as it comes (GET .../output as Server-Sent
// Events, read with fetch() so that the Authorization header goes along;
// after a dropped connection it resumes from the last offset it has) and
// sends what is typed (POST .../input).  Leaving the page ends the session.
// The bearer token is the login's, kept in sessionStorage["ganeti.session"].

import { Terminal } from "./vendor/xterm/xterm.mjs";

const SESSION_KEY = "ganeti.session";
const RETRY_FIRST = 1000;      // ms before the first reconnect
const RETRY_MAX = 15000;
const RETRIES = 8;             // reconnects in a row before giving up

const $ = (id) => document.getElementById(id);

// The pages are served with Content-Security-Policy: default-src 'self',
// which ignores <style> elements made at run time.  xterm.js sizes and
// colours its rows with such elements; their rules are copied into a
// constructed style sheet, which the policy allows.
function mirrorStyles(root) {
  if (!("adoptedStyleSheets" in document) || !window.CSSStyleSheet) {
    return;
  }
  const sheet = new CSSStyleSheet();
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
  let queued = false;
  const copy = () => {
    queued = false;
    const text = Array.from(root.querySelectorAll("style"))
      .map((el) => el.textContent).join("\n");
    try {
      sheet.replaceSync(text);
    } catch (err) {
      console.warn("console: cannot apply the terminal's styles", err);
    }
  };
  new MutationObserver(() => {
    if (!queued) {
      queued = true;
      queueMicrotask(copy);
    }
  }).observe(root, { subtree: true, childList: true, characterData: true });
  copy();
}

function pageStyles() {
  if (!("adoptedStyleSheets" in document)) {
    return;
  }
  const sheet = new CSSStyleSheet();
  sheet.replaceSync(`
    body.console-page { margin: 0; display: flex; flex-direction: column;
      height: 100vh; background: #000; color: #ddd;
      font-family: sans-serif; }
    #console-bar { display: flex; gap: 1em; align-items: center;
      padding: 0.4em 0.8em; background: #222; }
    #console-bar a { color: #9cf; }
    #console-status { flex: 1; color: #aaa; }
    #console-message { margin: 1em; }
    #console-message a { color: #9cf; }
    #console-terminal { flex: 1; min-height: 0; padding: 0.3em; }
  `);
  document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
}

function loadLogin() {
  let raw = null;
  try {
    raw = window.sessionStorage.getItem(SESSION_KEY);
  } catch (err) {
    return null;
  }
  if (!raw) {
    return null;
  }
  try {
    const login = JSON.parse(raw);
    return login && typeof login.token === "string" && login.token
      ? login : null;
  } catch (err) {
    return null;
  }
}

function showMessage(text, withLoginLink) {
  const box = $("console-message");
  box.textContent = text;
  if (withLoginLink) {
    box.append(" ");
    const link = document.createElement("a");
    link.href = "./";
    link.textContent = "Log in";
    box.append(link);
  }
  box.hidden = false;
}

function setStatus(text) {
  $("console-status").textContent = text;
}

function toBase64(bytes) {
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

function fromBase64(text) {
  const raw = atob(text);
  const bytes = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) {
    bytes[i] = raw.charCodeAt(i);
  }
  return bytes;
}

async function errorText(response) {
  try {
    const body = await response.json();
    if (body && body.message) {
      const explain = body.explain && body.explain !== body.message
        && !/^(Nothing matches|Request forbidden|No permission)/.test(
          body.explain) ? " (" + body.explain + ")" : "";
      return body.message + explain;
    }
  } catch (err) {
    // not JSON: the status says it
  }
  return "HTTP " + response.status + " " + response.statusText;
}

class ConsoleSession {
  constructor(instance, login, term) {
    this.instance = instance;
    this.login = login;
    this.term = term;
    this.base = "/2/instances/" + encodeURIComponent(instance) +
      "/console/sessions";
    this.id = null;
    this.offset = 0;
    this.ended = false;
    this.abort = null;
    this.queue = [];
    this.sending = false;
  }

  headers(extra) {
    return Object.assign({ "Authorization": "Bearer " + this.login.token },
      extra || {});
  }

  url(path) {
    return this.base + "/" + encodeURIComponent(this.id) + (path || "");
  }

  async open() {
    setStatus("Opening the console of " + this.instance);
    const response = await fetch(this.base, {
      method: "POST", headers: this.headers(), cache: "no-store" });
    if (!response.ok) {
      throw new Error(await errorText(response));
    }
    const answer = await response.json();
    this.id = answer.session;
    this.offset = 0;
    setStatus("Connected to " + this.instance);
    this.follow();
  }

  // The output as an event stream; reconnects after a dropped connection,
  // resuming after the last output it has.
  async follow() {
    let delay = RETRY_FIRST;
    let failures = 0;
    while (!this.ended) {
      this.abort = new AbortController();
      let progressed = false;
      try {
        const response = await fetch(this.url("/output"), {
          headers: this.headers({ "Accept": "text/event-stream",
                                  "Last-Event-ID": String(this.offset) }),
          cache: "no-store", signal: this.abort.signal });
        if (!response.ok) {
          const text = await errorText(response);
          if (response.status === 404 || response.status === 401 ||
              response.status === 403) {
            this.finish("The session ended: " + text, response.status === 401);
            return;
          }
          throw new Error(text);
        }
        setStatus("Connected to " + this.instance);
        progressed = await this.readEvents(response.body);
      } catch (err) {
        if (this.ended) {
          return;
        }
        setStatus("Connection lost (" + err.message + "); reconnecting");
      }
      if (this.ended) {
        return;
      }
      if (progressed) {
        delay = RETRY_FIRST;
        failures = 0;
      } else if (++failures >= RETRIES) {
        this.finish("Cannot reach the console; reload the page to try again");
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RETRY_MAX);
    }
  }

  async readEvents(body) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    let progressed = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) {
        return progressed;
      }
      progressed = true;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        this.handleEvent(block);
        if (this.ended) {
          reader.cancel().catch(() => {});
          return progressed;
        }
      }
    }
  }

  handleEvent(block) {
    let kind = "message";
    let id = null;
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        continue;          // a comment: keeps the connection alive
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) {
        value = value.slice(1);
      }
      if (field === "event") {
        kind = value;
      } else if (field === "data") {
        data.push(value);
      } else if (field === "id") {
        id = value;
      }
    }
    const text = data.join("\n");
    if (kind === "output") {
      this.term.write(fromBase64(text));
      if (id !== null && /^\d+$/.test(id)) {
        this.offset = Number(id);
      }
    } else if (kind === "gap") {
      const gap = JSON.parse(text);
      this.term.write("\r\n\x1b[2m[" + gap.dropped +
        " bytes of output were no longer kept]\x1b[0m\r\n");
      this.offset = gap.offset;
    } else if (kind === "closed") {
      this.finish("The session ended: " + JSON.parse(text).reason);
    } else if (kind === "error") {
      this.finish("Error: " + JSON.parse(text).message);
    }
  }

  // What is typed goes out in order, one request at a time; what is typed
  // meanwhile goes with the next.
  send(text, encoding) {
    if (this.ended || this.id === null) {
      return;
    }
    const last = this.queue[this.queue.length - 1];
    if (last && last.encoding === encoding && last.data.length < 4096) {
      last.data += text;
    } else {
      this.queue.push({ data: text, encoding: encoding });
    }
    if (!this.sending) {
      this.flush();
    }
  }

  async flush() {
    this.sending = true;
    try {
      while (this.queue.length && !this.ended) {
        const item = this.queue.shift();
        const response = await fetch(this.url("/input"), {
          method: "POST", cache: "no-store",
          headers: this.headers({ "Content-Type": "application/json" }),
          body: JSON.stringify(item) });
        if (!response.ok) {
          setStatus("Input not sent: " + await errorText(response));
        }
      }
    } catch (err) {
      setStatus("Input not sent: " + err.message);
    } finally {
      this.sending = false;
    }
  }

  finish(text, relogin) {
    if (this.ended) {
      return;
    }
    this.ended = true;
    if (this.abort) {
      this.abort.abort();
    }
    setStatus(text);
    if (relogin) {
      showMessage("Your login is no longer valid.", true);
    }
    $("console-disconnect").hidden = true;
    $("console-reconnect").hidden = false;
  }

  // Ends the session on the node (keepalive: also while the page unloads).
  close() {
    const id = this.id;
    this.finish("Disconnected");
    if (id !== null) {
      this.id = null;
      fetch(this.base + "/" + encodeURIComponent(id), {
        method: "DELETE", headers: this.headers(), keepalive: true,
      }).catch(() => {});
    }
  }
}

function main() {
  pageStyles();
  const params = new URLSearchParams(window.location.search);
  const instance = params.get("instance");
  if (!instance) {
    setStatus("No instance");
    showMessage("Which console? Open this page as console.html?instance=NAME," +
      " or from an instance's page.", false);
    return;
  }
  document.title = "Console of " + instance;
  $("console-title").textContent = instance;
  const login = loadLogin();
  if (login === null) {
    setStatus("Not logged in");
    showMessage("You are not logged in: log in first, then open the console" +
      " again.", true);
    return;
  }
  const rights = Array.isArray(login.rights) ? login.rights : null;
  if (rights !== null && !rights.includes("write")) {
    setStatus("Not allowed");
    showMessage("The console needs the write right, which " +
      (login.user || "this user") + " does not have.", false);
    return;
  }
  const box = $("console-terminal");
  const term = new Terminal({ convertEol: false, cursorBlink: true,
                              scrollback: 5000 });
  mirrorStyles(box);
  term.open(box);
  fitTerminal(term, box);
  window.addEventListener("resize", () => fitTerminal(term, box));
  let session = null;
  const start = () => {
    session = new ConsoleSession(instance, login, term);
    window.ganetiConsole = session;        // for tests and debugging
    $("console-reconnect").hidden = true;
    $("console-disconnect").hidden = false;
    session.open().catch((err) => session.finish(
      "Cannot open the console: " + err.message));
  };
  term.onData((text) => session && session.send(text, "utf-8"));
  term.onBinary((text) => session && session.send(btoa(text), "base64"));
  $("console-disconnect").addEventListener("click", () => session.close());
  $("console-reconnect").addEventListener("click", () => {
    term.reset();
    start();
  });
  window.addEventListener("pagehide", () => session && session.close());
  start();
  term.focus();
}

// The terminal takes the room the page gives it (no fit add-on: the size
// of a character cell is measured once).
function fitTerminal(term, box) {
  const probe = box.querySelector(".xterm-rows > div");
  const cell = term._core && term._core._renderService &&
    term._core._renderService.dimensions &&
    term._core._renderService.dimensions.css.cell;
  const width = cell && cell.width ? cell.width : 9;
  const height = cell && cell.height ? cell.height
    : (probe ? probe.getBoundingClientRect().height : 17) || 17;
  const cols = Math.max(20, Math.floor((box.clientWidth - 8) / width));
  const rows = Math.max(5, Math.floor((box.clientHeight - 8) / height));
  if (cols !== term.cols || rows !== term.rows) {
    term.resize(cols, rows);
  }
}

main();
