// The web console: login, hash-routed pages, actions, the task log, and
// live updates from the event stream.  Every element is built with
// textContent (never HTML from data), and no script runs inline.

import * as api from "./api.js";
import {EventStream} from "./sse.js";

// set at load: a page reload would lose it (the browser test checks it)
window.ganetiConsole = {loadedAt: Date.now()};

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function fmt(value) {
  if (value === null || value === undefined) return "";
  if (Array.isArray(value)) return value.map(fmt).join(", ");
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function mib(value) {
  if (value === null || value === undefined || value === "") return "";
  const n = Number(value);
  if (!isFinite(n)) return fmt(value);
  return n >= 1024 ? (n / 1024).toFixed(1) + " GiB" : n + " MiB";
}

function when(ts) {
  // [seconds, microseconds] or seconds
  if (ts === null || ts === undefined) return "";
  const seconds = Array.isArray(ts) ? ts[0] + ts[1] / 1e6 : Number(ts);
  if (!isFinite(seconds)) return "";
  return new Date(seconds * 1000).toLocaleString();
}

function statusCell(value) {
  return el("td", {"data-field": "status", class: "status-" + fmt(value),
                   text: fmt(value)});
}

function table(id, headers) {
  const tbody = el("tbody");
  const node = el("table", {id},
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", {text: h})))),
    tbody);
  return {node, tbody};
}

// Rows keyed by data-<key>: existing rows are refilled in place, new ones
// added, vanished ones removed (no reload, no flicker of the others).
function syncRows(tbody, items, key, fill) {
  const old = new Map();
  for (const tr of tbody.children) old.set(tr.dataset[key], tr);
  for (const item of items) {
    const id = String(item[key === "name" ? "name" : "id"]);
    let tr = old.get(id);
    old.delete(id);
    if (!tr) tr = el("tr", {dataset: {[key]: id}});
    fill(tr, item);
    tbody.append(tr);
  }
  for (const tr of old.values()) tr.remove();
}

function upsertRow(tbody, item, key, fill, first = false) {
  const id = String(item[key === "name" ? "name" : "id"]);
  let tr = [...tbody.children].find((r) => r.dataset[key] === id);
  if (!tr) {
    tr = el("tr", {dataset: {[key]: id}});
    if (first) tbody.prepend(tr); else tbody.append(tr);
  }
  fill(tr, item);
}

function removeRow(tbody, key, id) {
  for (const tr of [...tbody.children]) {
    if (tr.dataset[key] === String(id)) tr.remove();
  }
}

// --- state ---------------------------------------------------------------

const state = {
  session: null,
  info: null,
  page: null,        // the current page object
  stream: null,
  refreshTimer: null,
};

function writer() { return api.canWrite(state.session); }

function showError(err, where) {
  const text = (where ? where + ": " : "") + (err && err.message || err);
  const main = $("#page");
  const box = el("p", {class: "error", role: "alert", text});
  main.prepend(box);
  setTimeout(() => box.remove(), 15000);
}

// re-read the page a little later (events come in bursts)
function scheduleRefresh(delay = 400) {
  if (state.refreshTimer) return;
  state.refreshTimer = setTimeout(() => {
    state.refreshTimer = null;
    const page = state.page;
    if (page && page.refresh) {
      page.refresh().catch((e) => { if (state.page === page) showError(e); });
    }
  }, delay);
}

// --- confirmation dialog --------------------------------------------------

function confirmDialog(title, body, okText = "OK") {
  const dialog = $("#confirm");
  $("#confirm-title").textContent = title;
  $("#confirm-body").replaceChildren(...[].concat(body));
  const ok = $('button[data-confirm="ok"]', dialog);
  ok.textContent = okText;
  $('button[data-confirm="cancel"]', dialog).formNoValidate = true;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => {
      resolve(dialog.returnValue === "ok");
    }, {once: true});
    dialog.showModal();
  });
}

// --- the task log ----------------------------------------------------------

const tasks = new Map();   // job id -> {tr, label, after, ended}
const FINAL = new Set(["success", "error", "canceled"]);

function jobError(job) {
  const results = job && job.opresult || [];
  for (const r of results) {
    if (Array.isArray(r) && r.length === 2 && typeof r[0] === "string" &&
        /Error|Exception/.test(r[0])) {
      const args = Array.isArray(r[1]) ? r[1] : [r[1]];
      return r[0] + ": " + fmt(args[0]);
    }
  }
  if (job && job.status === "error") return fmt(results);
  return "";
}

function taskRow(task, status, message) {
  const tr = task.tr;
  const id = tr.dataset.id;
  tr.replaceChildren(
    el("td", {}, el("a", {href: "#/jobs/" + id, text: id})),
    el("td", {text: task.label}),
    statusCell(status),
    el("td", {class: "message", text: message || ""}));
}

function addTask(jobId, label, after) {
  const tr = el("tr", {dataset: {id: String(jobId)}});
  const task = {tr, label, after, ended: false, message: "submitted"};
  tasks.set(String(jobId), task);
  taskRow(task, "queued", task.message);
  $("#tasklog tbody").prepend(tr);
  // without a live event stream, the job is polled
  const poll = async () => {
    if (task.ended) return;
    if (!$("#live").classList.contains("live-on")) {
      try {
        const job = await api.get("/2/jobs/" + jobId);
        if (FINAL.has(job.status)) await finishTask(String(jobId), job);
        else taskRow(task, job.status, task.message);
      } catch (e) { /* try again */ }
    }
    if (!task.ended) setTimeout(poll, 3000);
  };
  setTimeout(poll, 3000);
}

async function finishTask(id, job) {
  const task = tasks.get(id);
  if (!task || task.ended) return;
  task.ended = true;
  try {
    if (!job) job = await api.get("/2/jobs/" + id);
  } catch (e) { job = {status: "?"}; }
  const message = job.status === "success" ? "done" :
    (jobError(job) || task.message);
  taskRow(task, job.status, message);
  if (task.after) {
    try { await task.after(); } catch (e) { /* the page refreshes anyway */ }
  }
  scheduleRefresh(0);
}

function taskEvent(ev) {
  if (ev.kind !== "job") return;
  const id = String(ev.id);
  const task = tasks.get(id);
  if (!task || task.ended) return;
  if (ev.type === "log") {
    task.message = fmt(ev.data.message);
    taskRow(task, task.tr.querySelector('[data-field="status"]').textContent,
            task.message);
  } else if (ev.type === "status") {
    taskRow(task, ev.data.status, task.message);
  } else if (ev.type === "finished") {
    finishTask(id);
  }
}

// Submit a job after confirmation; it shows in the task log and is
// followed to its end.  ``after`` runs once it ended.
async function act({title, question, label, method, path, body, after,
                    form, okText}) {
  const ok = await confirmDialog(title, form || el("p", {text: question}),
                                 okText || "OK");
  if (!ok) return;
  let jobId;
  try {
    const value = typeof body === "function" ? body() : body;
    jobId = await api.call(method, path, value);
  } catch (err) {
    showError(err, label);
    return;
  }
  addTask(jobId, label, after);
}

// --- pages -----------------------------------------------------------------

const pages = {};

pages.overview = {
  async render(main) {
    this.cards = el("div", {class: "cards", id: "cards"});
    this.props = el("dl", {class: "props", id: "cluster-props"});
    main.replaceChildren(el("h1", {text: "Overview"}), this.cards,
                         el("h2", {text: "Cluster"}), this.props);
    await this.refresh();
  },
  async refresh() {
    const [info, nodes, instances, jobs, maint] = await Promise.all([
      api.get("/2/info"), api.get("/2/nodes?bulk=1"),
      api.get("/2/instances?bulk=1"), api.get("/2/jobs?bulk=1"),
      api.get("/2/maintenance").catch(() => ({incidents: []})),
    ]);
    state.info = info;
    if (!this.cards.isConnected) return;    // another page meanwhile
    const running = instances.filter((i) => i.status === "running").length;
    const active = jobs.filter((j) => !FINAL.has(j.status)).length;
    const open = (maint.incidents || []).filter((i) => !["completed",
      "canceled", "ok"].includes(i["repair-status"])).length;
    const card = (value, label, href) => el("a", {href, class: "card"},
      el("div", {class: "value", text: value}),
      el("div", {class: "label", text: label}));
    this.cards.replaceChildren(
      card(nodes.length, "nodes (" + nodes.filter((n) => n.offline).length +
           " offline)", "#/nodes"),
      card(instances.length, "instances (" + running + " running)",
           "#/instances"),
      card(active, "jobs running or queued", "#/jobs"),
      card(open, "open maintenance incidents", "#/maintenance"));
    const props = [["Name", info.name], ["Master", info.master],
                   ["Version", info.software_version],
                   ["Default hypervisor", info.default_hypervisor],
                   ["Default allocator", info.default_iallocator],
                   ["Disk templates", info.enabled_disk_templates],
                   ["Tags", info.tags]];
    this.props.replaceChildren(...props.flatMap(([k, v]) =>
      [el("dt", {text: k}), el("dd", {text: fmt(v)})]));
  },
  event(ev) {
    if (["node", "instance", "maintenance", "cluster"].includes(ev.kind) ||
        (ev.kind === "job" && ["submitted", "finished"].includes(ev.type))) {
      scheduleRefresh(800);
    }
  },
};

// instances

//: disk templates whose data a second node has too (failover, migrate)
const MIRRORED_TEMPLATES = ["drbd", "sharedfile", "blockdev", "rbd", "ext",
                            "gluster"];

function reservationCell(inst) {
  const until = inst.lease_until ?
    " until " + new Date(inst.lease_until * 1000).toLocaleString() : "";
  return el("td", {"data-field": "status", class: "status-forthcoming",
                   text: "forthcoming" +
                     (inst.lease_state ? " (" + inst.lease_state + ")" : ""),
                   title: "A reservation: its resources are held" + until});
}

function instanceActions(inst) {
  const name = inst.name;
  const path = "/2/instances/" + api.enc(name);
  const after = () => pages.instances.one(name);
  const list = [
    ["startup", "Start", "PUT", "/startup"],
    ["shutdown", "Stop", "PUT", "/shutdown"],
    ["reboot", "Reboot", "POST", "/reboot"],
    ["migrate", "Migrate", "PUT", "/migrate"],
    ["failover", "Failover", "PUT", "/failover"],
  ];
  const td = el("td", {class: "actions"});
  const up = inst.admin_state === "up";
  // the browser console needs the write right, a running kvm instance and
  // its serial console (docs/console.rst)
  const serial = inst.hypervisor === "kvm" &&
    (inst.hvparams || {}).serial_console !== false;
  if (writer() && serial && up && !inst.forthcoming) {
    // "opener": only a tab that keeps its opener gets a copy of this
    // tab's sessionStorage, where the login is
    td.append(el("a", {"data-action": "console", target: "_blank",
                       rel: "opener",
                       href: "console.html?instance=" + api.enc(name),
                       title: "The serial console of " + name +
                         " (a new tab)",
                       text: "Console"}));
  }
  if (writer()) {
    const mirrored = MIRRORED_TEMPLATES.includes(inst.disk_template);
    for (const [action, label, method, suffix] of list) {
      let why = null;
      if (inst.forthcoming) {
        why = "a reservation: it has no disks or process yet";
      } else if (action === "startup" && up) {
        why = "already marked to run";
      } else if (["shutdown", "reboot", "migrate"].includes(action) && !up) {
        why = "not running";
      } else if (["migrate", "failover"].includes(action) && !mirrored) {
        why = "disk template " + fmt(inst.disk_template) +
          " keeps its data on one node";
      }
      td.append(el("button", {
        type: "button", "data-action": action, text: label,
        title: why ? label + ": not possible, " + why : label + " " + name,
        disabled: why !== null,
        onclick: () => act({
          title: label + " instance " + name,
          question: label + " the instance " + name + "?",
          label: label + " " + name, method, path: path + suffix, body: {},
          after}),
      }));
    }
  }
  return td;
}

function fillInstance(tr, inst) {
  const be = inst.beparams || {};
  tr.replaceChildren(
    el("td", {text: inst.name}),
    inst.forthcoming ? reservationCell(inst) : statusCell(inst.status),
    el("td", {text: fmt(inst.os)}),
    el("td", {text: [inst.pnode].concat(inst.snodes || []).join(" → "),
              title: "primary → secondaries"}),
    el("td", {text: mib(be.memory || be.maxmem) + " · " + fmt(be.vcpus) +
              " CPU · " + mib(inst.disk_usage) + " " +
              fmt(inst.disk_template),
              title: "memory · VCPUs · disk and disk template"}),
    instanceActions(inst));
}

pages.instances = {
  async render(main) {
    const t = table("instances", ["Name", "Status", "OS", "Nodes",
      "Resources", "Actions"]);
    this.tbody = t.tbody;
    main.replaceChildren(
      el("h1", {text: "Instances"}),
      writer() ? el("div", {class: "toolbar"},
        el("button", {type: "button", "data-action": "create",
                      text: "Add instance", onclick: () => createInstance()}))
        : null,
      t.node);
    await this.refresh();
  },
  async refresh() {
    // Ganeti's bulk list has neither the hypervisor nor (as Ganeti's
    // tools expect) whether an instance is a reservation: a query adds them
    const [list, extra] = await Promise.all([
      api.get("/2/instances?bulk=1"),
      // (a user without any right may not query: plain rows then)
      api.get("/2/query/instance?fields=name,hypervisor,forthcoming")
        .catch(() => ({data: []}))]);
    if (!this.tbody.isConnected) return;
    const more = new Map(extra.data.map(
      ([[, name], [, hypervisor], [, forthcoming]]) =>
        [name, {hypervisor, forthcoming}]));
    for (const inst of list) Object.assign(inst, more.get(inst.name) || {});
    syncRows(this.tbody, list, "name", fillInstance);
  },
  async one(name) {
    try {
      const inst = await api.get("/2/instances/" + api.enc(name));
      if (!this.tbody.isConnected) return;
      upsertRow(this.tbody, inst, "name", fillInstance);
    } catch (err) {
      if (err.status === 404) removeRow(this.tbody, "name", name);
      else throw err;
    }
  },
  event(ev) {
    if (ev.kind === "instance") {
      if (ev.type === "removed") removeRow(this.tbody, "name", ev.name);
      else this.one(ev.name).catch(() => {});
    } else if (ev.kind === "job" && ev.type === "finished") {
      // the running state gives no event of its own
      scheduleRefresh();
    }
  },
};

async function createInstance() {
  const info = state.info || await api.get("/2/info");
  const allocator = info.default_iallocator || "hail";
  const templates = info.enabled_disk_templates || ["plain"];
  const osList = el("datalist", {id: "os-list"});
  const field = (label, input) => el("label", {}, label, input);
  const form = el("div", {},
    field("Name", el("input", {name: "name", required: true,
                               placeholder: "new1.example.com"})),
    field("OS", el("input", {name: "os", required: true, list: "os-list",
                             placeholder: "name+variant"})),
    osList,
    field("Memory (MiB)", el("input", {name: "memory", type: "number",
                                       min: 1, value: 512, required: true})),
    field("VCPUs", el("input", {name: "vcpus", type: "number", min: 1,
                                value: 1, required: true})),
    field("Disk size (MiB)", el("input", {name: "disk", type: "number",
                                          min: 1, value: 1024,
                                          required: true})),
    field("Disk template", el("select", {name: "disk_template"},
      templates.map((t) => el("option", {value: t, text: t})))),
    el("p", {class: "hint", text: "The nodes are chosen by the cluster's" +
      " default instance allocator (" + allocator + ")."}));
  // the OS list is a job of its own: filled in when it arrives
  api.get("/2/os").then((names) => {
    osList.replaceChildren(...names.map((n) => el("option", {value: n})));
    const os = $("input[name=os]", form);
    if (!os.value && names.length) os.value = names[0];
  }).catch(() => {});
  const value = (name) => $("[name=" + name + "]", form).value;
  await act({
    title: "Add instance", form, label: "Add instance", okText: "Create",
    method: "POST", path: "/2/instances",
    body: () => ({
      __version__: 1, mode: "create", name: value("name").trim(),
      os: value("os").trim(), disk_template: value("disk_template"),
      disks: [{size: Number(value("disk"))}], nics: [{}],
      beparams: {memory: Number(value("memory")),
                 vcpus: Number(value("vcpus"))},
      iallocator: allocator,
    }),
    after: () => pages.instances.tbody && pages.instances.refresh(),
  });
}

// nodes

const ROLES = {M: "master", C: "candidate", R: "regular", D: "drained",
               O: "offline"};

function fillNode(tr, node) {
  const flags = [node.offline && "offline", node.drained && "drained"]
    .filter(Boolean).join(", ");
  const actions = el("td", {class: "actions"});
  if (writer()) {
    actions.append(el("button", {
      type: "button", "data-action": "evacuate", text: "Evacuate",
      title: "Move the instances off " + node.name,
      onclick: () => evacuate(node.name)}));
  }
  tr.replaceChildren(
    el("td", {text: node.name}),
    el("td", {text: ROLES[node.role] || fmt(node.role)}),
    el("td", {"data-field": "status", text: flags || "online"}),
    el("td", {text: fmt(node.pip)}),
    el("td", {text: mib(node.mfree) + " / " + mib(node.mtotal)}),
    el("td", {text: mib(node.dfree) + " / " + mib(node.dtotal)}),
    el("td", {text: fmt(node.pinst_cnt)}),
    el("td", {text: fmt(node.sinst_cnt)}),
    actions);
}

function evacuate(name) {
  const mode = el("select", {name: "mode"},
    el("option", {value: "all", text: "all instances"}),
    el("option", {value: "primary-only", text: "primary instances only"}),
    el("option", {value: "secondary-only",
                  text: "secondary instances only"}));
  const allocator = state.info && state.info.default_iallocator;
  const form = el("div", {},
    el("p", {text: "Move the instances off " + name + "?"}),
    el("label", {}, "Which", mode),
    el("p", {class: "hint", text: "New nodes are chosen by the cluster's" +
      " default instance allocator" + (allocator ? " (" + allocator + ")" :
      "") + "."}));
  return act({
    title: "Evacuate node", form, label: "Evacuate " + name,
    okText: "Evacuate",
    method: "POST", path: "/2/nodes/" + api.enc(name) + "/evacuate",
    body: () => allocator ? {mode: mode.value, iallocator: allocator}
      : {mode: mode.value},
    after: () => pages.nodes.tbody && pages.nodes.one(name),
  });
}

pages.nodes = {
  async render(main) {
    const t = table("nodes", ["Name", "Role", "State", "Address",
      "Memory free", "Disk free", "Primaries", "Secondaries", ""]);
    this.tbody = t.tbody;
    main.replaceChildren(el("h1", {text: "Nodes"}), t.node);
    await this.refresh();
  },
  async refresh() {
    const list = await api.get("/2/nodes?bulk=1");
    if (this.tbody.isConnected) syncRows(this.tbody, list, "name", fillNode);
  },
  async one(name) {
    try {
      const node = await api.get("/2/nodes/" + api.enc(name));
      if (this.tbody.isConnected) upsertRow(this.tbody, node, "name",
                                            fillNode);
    } catch (err) {
      if (err.status === 404) removeRow(this.tbody, "name", name);
    }
  },
  event(ev) {
    if (ev.kind === "node") {
      if (ev.type === "removed") removeRow(this.tbody, "name", ev.name);
      else this.one(ev.name);
    } else if (ev.kind === "job" && ev.type === "finished") {
      scheduleRefresh();
    }
  },
};

// jobs

function fillJob(tr, job) {
  tr.replaceChildren(
    el("td", {}, el("a", {href: "#/jobs/" + job.id, text: job.id})),
    el("td", {text: fmt(job.summary)}),
    statusCell(job.status),
    el("td", {text: when(job.received_ts)}),
    el("td", {text: when(job.start_ts)}),
    el("td", {text: when(job.end_ts)}));
}

const JOBS_SHOWN = 200;

pages.jobs = {
  async render(main) {
    const t = table("jobs", ["Id", "Summary", "Status", "Received",
                             "Started", "Ended"]);
    this.tbody = t.tbody;
    main.replaceChildren(el("h1", {text: "Jobs"}), t.node);
    await this.refresh();
  },
  async refresh() {
    const jobs = await api.get("/2/jobs?bulk=1");
    jobs.sort((a, b) => b.id - a.id);
    if (!this.tbody.isConnected) return;
    syncRows(this.tbody, jobs.slice(0, JOBS_SHOWN), "id", fillJob);
  },
  async one(id) {
    try {
      const job = await api.get("/2/jobs/" + id);
      if (this.tbody.isConnected) upsertRow(this.tbody, job, "id", fillJob,
                                            true);
    } catch (err) { /* archived: stays as it was */ }
  },
  event(ev) {
    if (ev.kind !== "job") return;
    if (ev.type === "status") {
      const tr = [...this.tbody.children].find(
        (r) => r.dataset.id === String(ev.id));
      if (tr) {
        tr.querySelector('[data-field="status"]').replaceWith(
          statusCell(ev.data.status));
        return;
      }
    }
    if (ev.type !== "log") this.one(ev.id);
  },
};

function logEntry(serial, ts, type, message) {
  return el("li", {dataset: {serial: String(serial)}, value: serial},
            when(ts) + "  " + fmt(type) + "  " + fmt(message));
}

pages.job = {
  async render(main, id) {
    this.id = String(id);
    this.props = el("dl", {class: "props", id: "job-props"});
    this.log = el("ol", {class: "joblog", id: "job-log"});
    main.replaceChildren(
      el("h1", {text: "Job " + id}),
      el("p", {}, el("a", {href: "#/jobs", text: "All jobs"})),
      this.props, el("h2", {text: "Log"}), this.log);
    await this.refresh();
  },
  async refresh() {
    const job = await api.get("/2/jobs/" + this.id);
    if (!this.props.isConnected) return;
    const rows = [["Status", job.status], ["Summary", job.summary],
                  ["Operations' status", job.opstatus],
                  ["Received", when(job.received_ts)],
                  ["Started", when(job.start_ts)],
                  ["Ended", when(job.end_ts)]];
    const error = jobError(job);
    if (error) rows.push(["Error", error]);
    else if (FINAL.has(job.status)) rows.push(["Result", job.opresult]);
    this.props.replaceChildren(...rows.flatMap(([k, v]) => [
      el("dt", {text: k}),
      k === "Status" ? el("dd", {"data-field": "status", text: fmt(v)})
        : el("dd", {text: fmt(v)})]));
    for (const oplog of job.oplog || []) {
      for (const [serial, ts, type, message] of oplog) {
        this.addLog(serial, ts, type, message);
      }
    }
  },
  addLog(serial, ts, type, message) {
    if (this.log.querySelector('[data-serial="' + Number(serial) + '"]')) {
      return;
    }
    this.log.append(logEntry(serial, ts, type, message));
  },
  event(ev) {
    if (ev.kind !== "job" || String(ev.id) !== this.id) return;
    if (ev.type === "log") {
      this.addLog(ev.data.serial, ev.data.timestamp, ev.data.type,
                  ev.data.message);
    } else {
      this.refresh().catch(() => {});
    }
  },
};

// tags

pages.tags = {
  async render(main) {
    this.list = el("div", {id: "tag-list"});
    const input = el("input", {name: "tag", placeholder: "new tag",
                               required: true});
    main.replaceChildren(
      el("h1", {text: "Cluster tags"}), this.list,
      writer() ? el("form", {id: "add-tag", class: "toolbar", onsubmit: (e) => {
        e.preventDefault();
        const tag = input.value.trim();
        if (!tag) return;
        act({title: "Add tag", question: "Add the cluster tag " + tag + "?",
             label: "Add tag " + tag, method: "PUT",
             path: "/2/tags?tag=" + api.enc(tag),
             after: () => { input.value = ""; }});
      }}, input, el("button", {type: "submit", text: "Add"})) : null);
    await this.refresh();
  },
  async refresh() {
    const tags = await api.get("/2/tags");
    if (!this.list.isConnected) return;
    tags.sort();
    this.list.replaceChildren(...tags.map((tag) => el("span", {
      class: "tag", dataset: {tag}}, tag,
      writer() ? el("button", {type: "button", "data-action": "remove-tag",
        title: "Remove " + tag, text: "×",
        onclick: () => act({
          title: "Remove tag", question: "Remove the cluster tag " + tag +
            "?", label: "Remove tag " + tag, method: "DELETE",
          path: "/2/tags?tag=" + api.enc(tag)})}) : null)));
    if (!tags.length) this.list.append(el("p", {class: "hint",
                                                text: "No tags."}));
  },
  event(ev) {
    if (ev.kind === "tags" && ev.data && ev.data.kind === "cluster") {
      scheduleRefresh(0);
    }
  },
};

// maintenance

pages.maintenance = {
  async render(main) {
    this.incidents = table("incidents", ["Id", "Node", "Action",
                                         "Repair status", "Jobs", "Tag"]);
    this.repair = table("autorepair", ["Instance", "State", "Policy",
                                       "Needs", "Pending", "Last result"]);
    this.switches = el("dl", {class: "props", id: "maint-props"});
    main.replaceChildren(
      el("h1", {text: "Maintenance"}),
      el("h2", {text: "Incidents of the maintenance daemon"}),
      this.incidents.node,
      el("h2", {text: "Auto-repair"}), this.repair.node,
      el("h2", {text: "Maintenance daemon"}), this.switches);
    await this.refresh();
  },
  async refresh() {
    const [maint, repair] = await Promise.all([
      api.get("/2/maintenance"), api.get("/2/autorepair")]);
    if (!this.switches.isConnected) return;
    syncRows(this.incidents.tbody, maint.incidents || [], "id",
      (tr, inc) => tr.replaceChildren(
        el("td", {text: fmt(inc.id)}),
        el("td", {text: fmt(inc.node_name || inc.node)}),
        el("td", {text: fmt(inc.action)}),
        statusCell(inc["repair-status"]),
        el("td", {text: fmt(inc.jobs)}),
        el("td", {text: fmt(inc.tag)})));
    syncRows(this.repair.tbody, repair, "name",
      (tr, r) => tr.replaceChildren(
        el("td", {text: r.name}), statusCell(r.state),
        el("td", {text: fmt(r.policy)}),
        el("td", {text: fmt(r.needs)}),
        el("td", {text: fmt(r.pending)}),
        el("td", {text: fmt(r.last_result)})));
    const rest = Object.entries(maint).filter(
      ([k]) => !["incidents"].includes(k));
    this.switches.replaceChildren(...rest.flatMap(([k, v]) =>
      [el("dt", {text: k}), el("dd", {text: fmt(v)})]));
  },
  event(ev) {
    if (["maintenance", "tags", "instance"].includes(ev.kind)) {
      scheduleRefresh(500);
    }
  },
};

// --- routing ----------------------------------------------------------------

// The server decides the rights on every request (the users file may have
// changed since the login): the buttons follow what it says now.
async function refreshRights() {
  const now = await api.get("/2/sessions");
  const old = state.session;
  if (!old || now.rights.join(",") === old.rights.join(",")) return false;
  api.saveSession({token: old.token, user: now.user, rights: now.rights});
  state.session = api.loadSession();
  showUser();
  return true;
}

function showUser() {
  $("#whoami").textContent = state.session.user + " (" +
    (state.session.rights.join(", ") || "no rights") + ")";
}

async function route() {
  if (!state.session) return;
  try { await refreshRights(); } catch (err) { /* a 401 logs out */ }
  if (!state.session) return;
  const hash = location.hash.replace(/^#\/?/, "") || "overview";
  const [name, arg] = hash.split("/");
  let page = pages[name];
  if (name === "jobs" && arg) page = pages.job;
  if (!page) page = pages.overview;
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("current", a.dataset.page === name);
  }
  state.page = page;
  const main = $("#page");
  try {
    await page.render(main, arg);
  } catch (err) {
    if (state.page === page) showError(err);
  }
}

// --- live -------------------------------------------------------------------

function setLive(mode) {
  const live = $("#live");
  const text = {live: "live", connecting: "connecting", waiting:
                "reconnecting", off: "offline"}[mode] || mode;
  live.textContent = text;
  live.className = mode === "live" ? "live-on" :
    mode === "off" ? "live-off" : "live-wait";
}

function onEvent(ev) {
  taskEvent(ev);
  if (state.page && state.page.event) {
    try { state.page.event(ev); } catch (e) { console.error(e); }
  }
}

// --- login, logout -----------------------------------------------------------

function showLogin(message) {
  if (state.stream) state.stream.stop();
  state.stream = null;
  state.session = null;
  $("#app").hidden = true;
  $("#logout").hidden = true;
  $("#whoami").textContent = "";
  $("#login-view").hidden = false;
  $("#login-error").textContent = message || "";
  $("#login input[name=username]").focus();
}

async function showApp() {
  state.session = api.loadSession();
  $("#login-view").hidden = true;
  $("#app").hidden = false;
  $("#logout").hidden = false;
  showUser();
  try {
    state.info = await api.get("/2/info");
    $("#cluster-name").textContent = state.info.name;
  } catch (err) { /* the page says it */ }
  state.stream = new EventStream({
    onEvent, onState: setLive,
    onResync: () => scheduleRefresh(0),
    token: () => (api.loadSession() || {}).token,
    onUnauthorized: () => sessionEnded(),
  });
  state.stream.start();
  await route();
}

function sessionEnded() {
  api.clearSession();
  showLogin("Your session has ended; log in again.");
}

api.setUnauthorizedHandler(sessionEnded);

$("#login").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = e.target;
  const button = $("button[type=submit]", form);
  button.disabled = true;
  $("#login-error").textContent = "";
  try {
    await api.login(form.username.value, form.password.value);
    form.password.value = "";
    await showApp();
  } catch (err) {
    $("#login-error").textContent = err.status === 429
      ? err.message : err.status === 401
      ? "Wrong user name or password." : "Login failed: " + err.message;
  } finally {
    button.disabled = false;
  }
});

$("#logout").addEventListener("click", async () => {
  await api.logout();
  showLogin("Logged out.");
});

window.addEventListener("hashchange", route);

if (api.loadSession()) showApp(); else showLogin();
