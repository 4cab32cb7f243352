// The master's event stream (GET /2/events) read with fetch() and a
// streaming body reader, so that the Authorization header goes along
// (EventSource cannot send one).  Resumes with Last-Event-ID after a drop;
// a "reset" event (too old to resume) is handed on, so the page re-reads.

export class EventStream {
  // onEvent(event), onState("connecting" | "live" | "waiting" | "off"),
  // onResync(): re-read everything (after a reset, or a fresh start),
  // token(): the current Bearer token, onUnauthorized()
  constructor({onEvent, onState, onResync, token, onUnauthorized}) {
    this.onEvent = onEvent;
    this.onState = onState;
    this.onResync = onResync;
    this.token = token;
    this.onUnauthorized = onUnauthorized;
    this.lastId = null;
    this.running = false;
    this.controller = null;
    this.delay = 1000;
  }

  start() {
    if (this.running) return;
    this.running = true;
    this.loop();
  }

  stop() {
    this.running = false;
    if (this.controller) this.controller.abort();
    this.onState("off");
  }

  async loop() {
    while (this.running) {
      this.onState("connecting");
      try {
        await this.once();
      } catch (e) {
        if (!this.running) break;
        console.warn("event stream:", e.message || e);
      }
      if (!this.running) break;
      this.onState("waiting");
      await new Promise((r) => setTimeout(r, this.delay));
      this.delay = Math.min(this.delay * 2, 30000);
    }
  }

  async once() {
    const token = this.token();
    if (!token) { this.running = false; return; }
    const headers = {"Accept": "text/event-stream",
                     "Authorization": "Bearer " + token};
    if (this.lastId !== null) headers["Last-Event-ID"] = String(this.lastId);
    this.controller = new AbortController();
    const response = await fetch("/2/events", {
      headers, cache: "no-store", signal: this.controller.signal});
    if (response.status === 401) {
      this.running = false;
      this.onUnauthorized();
      return;
    }
    if (!response.ok) throw new Error("HTTP " + response.status);
    const reader = response.body.pipeThrough(new TextDecoderStream())
      .getReader();
    let buffer = "";
    let first = true;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      if (first) {
        first = false;
        this.delay = 1000;
        this.onState("live");
      }
      buffer += value.replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        this.block(block);
      }
    }
    throw new Error("the event stream closed");
  }

  block(block) {
    let id = null, kind = null, data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) {
        // the head comment names the newest event: a fresh stream starts
        // there, and the page re-reads what it shows
        const m = /event stream of (-?\d+)/.exec(line);
        if (m && this.lastId === null) {
          this.lastId = Number(m[1]);
          this.onResync();
        }
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "id") id = value;
      else if (field === "event") kind = value;
      else if (field === "data") data.push(value);
    }
    if (id !== null && id !== "") this.lastId = Number(id);
    if (!data.length) return;
    let event;
    try { event = JSON.parse(data.join("\n")); } catch (e) { return; }
    if ((kind || event.kind) === "reset") {
      this.onResync();
      return;
    }
    this.onEvent(event);
  }
}
