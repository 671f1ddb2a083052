// adk_actors dev console: a same-origin client of the /dev/v1 API. Plain ES2020, no dependencies.
//
// Security rules this file keeps:
// * the developer token lives in the `token` variable only (never storage, cookies or the URL) and leaves the
//   page only in the Authorization header of same-origin requests;
// * text from the server is put on the page with textContent, never parsed as HTML.
"use strict";

(() => {
  const API = "/dev/v1";
  const APP_NAME = "dev";
  const MAX_STREAM_RETRIES = 6;
  const SESSION_EVENTS = 100;

  let token = null;
  let agents = [];
  let follow = null; // the run whose events this page is reading (see followRun)
  let metricsLoaded = false;
  let mcpSelected = null; // the connection id whose tools the MCP panel shows
  let triggerSelected = null; // the trigger whose recent outcomes the Triggers panel shows
  let liveFollow = null; // the Live session whose events the Live panel reads (see followLive)
  const conversation = { user: "dev-user", session: null };

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function json(value, indent) {
    try {
      return JSON.stringify(value, null, indent);
    } catch (err) {
      return String(value);
    }
  }

  function showMessage(node, text) {
    node.textContent = text || "";
    node.hidden = !text;
  }

  function delay(ms, signal) {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      if (signal) signal.addEventListener("abort", () => { clearTimeout(timer); resolve(); }, { once: true });
    });
  }

  // ---- HTTP ----------------------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, reason, message, details) {
      super(message);
      this.status = status;
      this.reason = reason;
      this.details = details || {};
    }

    describe() {
      return this.message ? `${this.reason}: ${this.message}` : this.reason;
    }
  }

  function describe(err) {
    return err instanceof ApiError ? err.describe() : `error: ${err && err.message ? err.message : err}`;
  }

  async function errorOf(response) {
    let body = null;
    try {
      body = await response.json();
    } catch (err) {
      body = null;
    }
    const e = (body && typeof body.error === "object" && body.error) || {};
    const reason = typeof e.reason === "string" ? e.reason : `http_${response.status}`;
    const message = typeof e.message === "string" ? e.message : response.statusText;
    return new ApiError(response.status, reason, message, e);
  }

  function authHeaders(extra) {
    return Object.assign({ Authorization: `Bearer ${token}` }, extra || {});
  }

  async function api(method, path, body) {
    if (token === null) throw new ApiError(0, "not_connected", "connect with a token first");
    const init = { method, headers: authHeaders(), cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let response;
    try {
      response = await fetch(API + path, init);
    } catch (err) {
      throw new ApiError(0, "network_error", "the node did not answer");
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (response.status === 401) refused(error);
      throw error;
    }
    return response.status === 204 ? null : response.json();
  }

  function pathOf(...segments) {
    return segments.map((s) => encodeURIComponent(s)).join("/");
  }

  // ---- SSE over fetch (EventSource cannot send the Authorization header) -------------------------------------

  // Yields {id, event, data} for each message of a text/event-stream body; lines end with \n or \r\n.
  async function* sseMessages(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    let message = { id: null, event: "message", data: [] };
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n")) >= 0) {
          let line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          if (line.endsWith("\r")) line = line.slice(0, -1);
          if (line === "") {
            if (message.data.length) yield { id: message.id, event: message.event, data: message.data.join("\n") };
            message = { id: null, event: "message", data: [] };
            continue;
          }
          if (line.startsWith(":")) continue; // a keepalive comment
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          let text = colon < 0 ? "" : line.slice(colon + 1);
          if (text.startsWith(" ")) text = text.slice(1);
          if (field === "id") message.id = text;
          else if (field === "event") message.event = text;
          else if (field === "data") message.data.push(text);
        }
      }
    } finally {
      // Leaving early (an outcome, a bound, another run followed) releases the connection at once.
      reader.cancel().catch(() => {});
    }
  }

  // ---- connect ---------------------------------------------------------------------------------------------------

  async function connect(event) {
    event.preventDefault();
    const input = $("token-input");
    const value = input.value.trim();
    showMessage($("connect-error"), "");
    if (!value) {
      showMessage($("connect-error"), "Enter the developer token.");
      return;
    }
    $("connect-btn").disabled = true;
    token = value;
    try {
      const data = await api("GET", "/agents");
      input.value = "";
      enterApp(data.agents || []);
    } catch (err) {
      token = null;
      showMessage($("connect-error"), `The node refused: ${describe(err)}`);
      input.select();
    } finally {
      $("connect-btn").disabled = false;
    }
  }

  function enterApp(list) {
    $("connect-screen").hidden = true;
    $("app").hidden = false;
    $("disconnect").hidden = false;
    setBadge($("conn-state"), "on", "connected");
    fillAgents(list);
    loadNodeInfo();
    $("chat-input").focus();
  }

  // The token is wrong (or the node forgot it): forget it and go back to the connect screen.
  function refused(error) {
    if (token === null || $("app").hidden) return;
    leaveApp();
    showMessage($("connect-error"), `The node refused the token: ${error.describe()}`);
  }

  function leaveApp() {
    token = null;
    stopFollowing();
    $("app").hidden = true;
    $("connect-screen").hidden = false;
    $("disconnect").hidden = true;
    $("node-info").textContent = "";
    setBadge($("conn-state"), "off", "not connected");
    clearChat();
    $("timeline").replaceChildren();
    setSession(null);
    metricsLoaded = false;
    $("metrics-rows").replaceChildren();
    mcpSelected = null;
    $("mcp-rows").replaceChildren();
    $("mcp-detail").hidden = true;
    triggerSelected = null;
    $("triggers-rows").replaceChildren();
    $("trigger-detail").hidden = true;
    stopLive();
    $("live-rows").replaceChildren();
    $("live-detail").hidden = true;
    $("token-input").focus();
  }

  async function loadNodeInfo() {
    try {
      const info = await api("GET", "/diagnostics");
      $("node-info").textContent = `v${info.version} · node port ${info.port}`;
    } catch (err) {
      $("node-info").textContent = "";
    }
  }

  function setBadge(node, kind, text) {
    node.className = `badge badge-${kind}`;
    node.textContent = text;
  }

  // ---- agents ----------------------------------------------------------------------------------------------------

  function fillAgents(list) {
    agents = list;
    const select = $("agent-select");
    const previous = select.value;
    select.replaceChildren();
    if (!list.length) {
      const option = el("option", null, "no agent is running on this node");
      option.value = "";
      select.append(option);
    }
    for (const agent of list) {
      const option = el("option", null, agent.available ? agent.name : `${agent.name} (not answering)`);
      option.value = agent.name;
      option.disabled = !agent.available;
      select.append(option);
    }
    if (list.some((a) => a.name === previous)) select.value = previous;
    showAgent();
  }

  function showAgent() {
    const agent = agents.find((a) => a.name === $("agent-select").value);
    $("agent-description").textContent = agent ? agent.description || "No description." : "";
    const tools = $("agent-tools");
    tools.replaceChildren();
    for (const name of (agent && agent.tools) || []) tools.append(el("span", "chip", name));
    for (const name of (agent && agent.sub_agents) || []) tools.append(el("span", "chip", `agent: ${name}`));
    $("chat-agent").textContent = agent ? `talking to ${agent.name}` : "";
  }

  async function reloadAgents() {
    try {
      fillAgents((await api("GET", "/agents")).agents || []);
    } catch (err) {
      showMessage($("run-error"), describe(err));
    }
  }

  // ---- chat --------------------------------------------------------------------------------------------------

  function chatLine(className, author, text) {
    const node = el("div", `msg ${className}`);
    if (author) node.append(el("span", "msg-author", author));
    node.append(el("span", "msg-text", text));
    const log = $("chat-log");
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.append(node);
    if (atBottom) log.scrollTop = log.scrollHeight;
    return node;
  }

  function chatNote(text, kind) {
    return chatLine(`msg-note${kind ? ` msg-${kind}` : ""}`, null, text);
  }

  function clearChat() {
    $("chat-log").replaceChildren();
    hidePause();
  }

  function textOf(parts, thoughts) {
    return parts
      .filter((p) => p.type === "text" && Boolean(p.thought) === thoughts)
      .map((p) => p.text)
      .join("");
  }

  function setSession(sessionId) {
    conversation.session = sessionId;
    $("session-id").textContent = sessionId || "new on first message";
    $("session-panel-id").textContent = sessionId || "none yet";
    if (!sessionId) {
      $("state-rows").replaceChildren();
      $("state-empty").hidden = false;
      $("session-meta").textContent = "Send a message to start a session, or open one below.";
    }
  }

  async function send(event) {
    if (event) event.preventDefault();
    const input = $("chat-input");
    const text = input.value.trim();
    const agent = $("agent-select").value;
    showMessage($("run-error"), "");
    if (!text) return;
    if (!agent) {
      chatNote("Pick an agent first.", "failed");
      return;
    }
    $("send-btn").disabled = true;
    const body = { agent, input: text, user_id: conversation.user, app_name: APP_NAME };
    if (conversation.session) body.session_id = conversation.session;
    chatLine("msg-user", conversation.user, text);
    input.value = "";
    try {
      const started = await api("POST", "/runs", body);
      setSession(started.session_id);
      $("timeline").replaceChildren();
      followRun(started.run_id, 0, { echoed: true });
    } catch (err) {
      chatNote(`Could not start the run: ${describe(err)}`, "failed");
      $("send-btn").disabled = false;
    }
  }

  // ---- following a run -------------------------------------------------------------------------------------

  function setRunState(f, state) {
    f.state = state;
    if (follow !== f) return;
    setBadge($("run-state"), state, state);
    const active = state === "starting" || state === "running" || state === "reconnecting";
    $("cancel-btn").disabled = !active;
    $("send-btn").disabled = active;
  }

  function stopFollowing() {
    if (follow) follow.controller.abort();
    follow = null;
  }

  // Read the run's events after `afterSeq` until its outcome, reconnecting with Last-Event-ID after a drop or a
  // stream bound. `carry` takes over a streaming answer bubble when the same run is followed again.
  function followRun(runId, afterSeq, options, carry) {
    stopFollowing();
    hidePause();
    const f = {
      runId,
      lastSeq: afterSeq,
      controller: new AbortController(),
      echoed: Boolean(options && options.echoed),
      userShown: false,
      bubble: carry ? carry.bubble : null,
      answered: carry ? carry.answered : false,
      done: false,
      state: "starting",
    };
    follow = f;
    $("run-id").textContent = runId;
    $("reconnect-input").value = runId;
    setRunState(f, "starting");
    streamLoop(f);
    return f;
  }

  async function streamLoop(f) {
    let failures = 0;
    while (!f.done && follow === f) {
      const headers = authHeaders({ Accept: "text/event-stream" });
      if (f.lastSeq > 0) headers["Last-Event-ID"] = String(f.lastSeq);
      let progressed = false;
      try {
        const response = await fetch(`${API}/runs/${pathOf(f.runId)}/events`, {
          headers,
          signal: f.controller.signal,
          cache: "no-store",
          credentials: "omit",
        });
        if (!response.ok) {
          const error = await errorOf(response);
          if (response.status === 401) refused(error);
          if (response.status < 500) {
            streamFailed(f, `Cannot follow run ${f.runId}: ${error.describe()}`);
            return;
          }
          throw error;
        }
        setRunState(f, "running");
        for await (const message of sseMessages(response.body.getReader())) {
          if (follow !== f) return;
          const verdict = onMessage(f, message);
          if (verdict === "event") progressed = true;
          if (verdict === "bound") progressed = true;
          if (verdict === "outcome" || verdict === "bound" || verdict === "error") break;
        }
      } catch (err) {
        if (follow !== f || f.controller.signal.aborted) return;
      }
      if (f.done || follow !== f) return;
      failures = progressed ? 0 : failures + 1;
      if (failures > MAX_STREAM_RETRIES) {
        streamFailed(f, `Lost the event stream of run ${f.runId}; press Reconnect to try again.`);
        return;
      }
      setRunState(f, "reconnecting");
      if (failures) await delay(Math.min(250 * 2 ** failures, 4000), f.controller.signal);
    }
  }

  function streamFailed(f, text) {
    if (follow !== f) return;
    setRunState(f, "disconnected");
    showMessage($("run-error"), text);
    timelineNote(text, "error");
  }

  function onMessage(f, message) {
    let data = null;
    try {
      data = JSON.parse(message.data);
    } catch (err) {
      timelineNote("An unreadable stream message was skipped.", "error");
      return "skipped";
    }
    if (message.event === "event") {
      const seq = Number.parseInt(message.id, 10);
      if (Number.isFinite(seq)) {
        if (seq <= f.lastSeq) return "duplicate";
        f.lastSeq = seq;
      }
      renderEvent(f, data, seq);
      return "event";
    }
    if (message.event === "gap") {
      timelineNote(`Events ${data.from_seq}..${data.resumes_at - 1} were dropped by the node (${data.reason}).`, "error");
      return "event";
    }
    if (message.event === "outcome") {
      f.done = true;
      renderOutcome(f, data);
      return "outcome";
    }
    if (message.event === "bound") return "bound";
    if (message.event === "error") {
      timelineNote(`The stream ended with an error: ${data.reason}; reconnecting.`, "error");
      return "error";
    }
    return "skipped";
  }

  function renderEvent(f, ev, seq) {
    addTimelineEvent(ev, seq);
    const parts = (ev.content && Array.isArray(ev.content.parts) && ev.content.parts) || [];
    const author = ev.author || "?";
    if (author === "user") {
      const text = textOf(parts, false);
      if (!text) return;
      if (f.echoed && !f.userShown) f.userShown = true;
      else chatLine("msg-user", "user", text);
      return;
    }
    const text = textOf(parts, false);
    if (ev.partial) {
      if (text) {
        if (!f.bubble) f.bubble = chatLine("msg-agent msg-streaming", author, "");
        const span = f.bubble.querySelector(".msg-text");
        span.textContent += text;
        $("chat-log").scrollTop = $("chat-log").scrollHeight;
      }
      return;
    }
    for (const part of parts) {
      if (part.type === "function_call") chatLine("msg-tool", null, `→ ${part.name}(${json(part.args)})`);
      if (part.type === "function_response") chatLine("msg-tool", null, `← ${part.name}: ${json(part.response)}`);
    }
    if (text) {
      if (f.bubble) {
        f.bubble.querySelector(".msg-text").textContent = text;
        f.bubble.classList.remove("msg-streaming");
        f.bubble = null;
      } else {
        chatLine("msg-agent", author, text);
      }
      f.answered = true;
    }
    if (ev.error) chatNote(`${author} reported an error: ${ev.error.reason}`, "failed");
  }

  function renderOutcome(f, outcome) {
    setRunState(f, outcome.state);
    if (f.bubble) {
      f.bubble.classList.remove("msg-streaming");
      f.bubble = null;
    }
    const entry = timelineEntry("outcome", null, "run", `outcome: ${outcome.state}`);
    if (outcome.state === "completed") {
      entry.classList.add("tl-final");
      if (!f.answered && outcome.output !== undefined && outcome.output !== null) {
        const output = typeof outcome.output === "string" ? outcome.output : json(outcome.output, 2);
        if (output) chatLine("msg-agent", "output", output);
      }
    } else if (outcome.state === "paused") {
      entry.classList.add("tl-pause");
      const pause = outcome.event && outcome.event.actions && outcome.event.actions.pause;
      if (pause) showPause(f, pause);
    } else if (outcome.state === "cancelled") {
      chatNote(`Run cancelled (${outcome.reason}).`, "cancelled");
    } else {
      entry.classList.add("tl-error");
      chatNote(`Run failed: ${outcome.reason || outcome.state}.`, "failed");
      if (outcome.reason) addBody(entry, json({ reason: outcome.reason, details: outcome.details }, 2));
    }
    refreshSession(true);
  }

  async function cancelRun() {
    const f = follow;
    if (!f) return;
    $("cancel-btn").disabled = true;
    try {
      const outcome = await api("POST", `/runs/${pathOf(f.runId)}/cancel`, {});
      if (follow === f && !f.done) {
        f.done = true;
        f.controller.abort();
        renderOutcome(f, outcome);
      }
    } catch (err) {
      showMessage($("run-error"), `Cancel refused: ${describe(err)}`);
      setRunState(f, f.state);
    }
  }

  function reconnect() {
    const runId = $("reconnect-input").value.trim();
    showMessage($("run-error"), "");
    if (!runId) {
      showMessage($("run-error"), "Enter a run id.");
      return;
    }
    if (follow && follow.runId === runId) {
      timelineNote(`Reconnecting after event ${follow.lastSeq}.`);
      followRun(runId, follow.lastSeq, { echoed: follow.echoed && !follow.userShown }, follow);
    } else {
      $("timeline").replaceChildren();
      chatNote(`Following run ${runId}.`);
      followRun(runId, 0, { echoed: false });
    }
  }

  // ---- pauses ------------------------------------------------------------------------------------------------

  function showPause(f, pause) {
    const details = pause.details || {};
    f.pause = pause;
    $("pause-box").hidden = false;
    showMessage($("pause-error"), "");
    const fn = details.function_name || "a tool";
    if (pause.reason === "tool_confirmation") {
      $("pause-title").textContent = `${fn} needs your approval`;
      $("pause-detail").textContent = details.hint || "The run is paused until you approve or reject this call.";
      $("confirm-actions").hidden = false;
      $("long-running-actions").hidden = true;
      $("approve-btn").focus();
    } else if (pause.reason === "credential") {
      // A credential request: the sign-in happens in the application (its authorization URI holds the one-time
      // state, which never reaches this console); the application resumes with the flow's answer.
      $("pause-title").textContent = `${fn} needs a sign-in with ${details.provider || "a provider"}`;
      const scopes = (details.scopes || []).join(" ");
      $("pause-detail").textContent =
        `Flow ${details.flow_ref || "?"} asks for scopes "${scopes}". Complete the sign-in in the ` +
        "application, then resume with its answer, or resume with {\"cancelled\": true} to give up.";
      $("confirm-actions").hidden = true;
      $("long-running-actions").hidden = false;
      const template = { flow_ref: details.flow_ref || "", correlation_id: "" };
      $("long-running-input").value = json(template, 2);
    } else {
      $("pause-title").textContent =
        pause.reason === "long_running" ? `${fn} is running outside the agent` : `The run paused (${pause.reason})`;
      $("pause-detail").textContent =
        details.message || "Type the operation's final answer as JSON to resume the run.";
      $("confirm-actions").hidden = true;
      $("long-running-actions").hidden = false;
      const template = { operation_id: details.operation_id || "", status: "completed", result: {} };
      $("long-running-input").value = json(template, 2);
    }
    chatNote(`Paused: ${$("pause-title").textContent}.`);
  }

  function hidePause() {
    $("pause-box").hidden = true;
    $("confirm-actions").hidden = true;
    $("long-running-actions").hidden = true;
  }

  async function resume(response) {
    const f = follow;
    if (!f || !f.pause) return;
    for (const id of ["approve-btn", "reject-btn", "long-running-btn"]) $(id).disabled = true;
    try {
      const resumed = await api("POST", `/runs/${pathOf(f.runId)}/resume`, { tool_response: response });
      f.pause = null;
      timelineNote(`Resumed as run ${resumed.run_id}.`);
      followRun(resumed.run_id, 0, { echoed: false });
    } catch (err) {
      showMessage($("pause-error"), `Resume refused: ${describe(err)}`);
    } finally {
      for (const id of ["approve-btn", "reject-btn", "long-running-btn"]) $(id).disabled = false;
    }
  }

  function answerLongRunning() {
    let value;
    try {
      value = JSON.parse($("long-running-input").value);
    } catch (err) {
      showMessage($("pause-error"), `Not valid JSON: ${err.message}`);
      return;
    }
    resume(value);
  }

  // ---- timeline ----------------------------------------------------------------------------------------------

  function timelineEntry(kind, seq, author, label) {
    const item = el("li", `tl tl-${kind}`);
    const head = el("div", "tl-head");
    head.append(el("span", "tl-seq", seq === null || seq === undefined || Number.isNaN(seq) ? "" : `#${seq}`));
    if (author) head.append(el("span", "tl-author", author));
    head.append(el("span", "tl-kind", label || kind));
    item.append(head);
    const list = $("timeline");
    list.append(item);
    const panel = $("panel-timeline");
    panel.scrollTop = panel.scrollHeight;
    return item;
  }

  function addBody(item, text) {
    item.append(el("pre", "tl-body", text));
  }

  function timelineNote(text, kind) {
    const item = timelineEntry(kind === "error" ? "error" : "note", null, null, kind === "error" ? "error" : "note");
    addBody(item, text);
  }

  function kindOf(ev, parts) {
    if (ev.error) return "error";
    if (ev.actions && ev.actions.pause) return "pause";
    if (parts.some((p) => p.type === "function_call")) return "function_call";
    if (parts.some((p) => p.type === "function_response")) return "function_response";
    if (ev.partial) return "partial";
    if (ev.is_final) return "final";
    if (parts.length) return "text";
    return "note";
  }

  function addTimelineEvent(ev, seq) {
    const parts = (ev.content && Array.isArray(ev.content.parts) && ev.content.parts) || [];
    const kind = kindOf(ev, parts);
    const item = timelineEntry(kind, seq, ev.author || "?", kind);
    item.dataset.seq = Number.isFinite(seq) ? String(seq) : "";
    // A streamed answer's final event carries its text in the pieces it arrived in: consecutive text parts (of the
    // same kind, thought or answer) are one body.
    let run = null;
    for (const part of parts) {
      if (part.type === "text") {
        const thought = Boolean(part.thought);
        if (run && run.thought === thought) {
          run.node.textContent += part.text;
        } else {
          addBody(item, thought ? `(thought) ${part.text}` : part.text);
          run = { thought, node: item.lastElementChild };
        }
        continue;
      }
      run = null;
      if (part.type === "function_call") addBody(item, `call ${part.name}(${json(part.args, 2)})`);
      else if (part.type === "function_response") addBody(item, `${part.name} returned ${json(part.response, 2)}`);
      else addBody(item, `${part.type} part${part.mime_type ? ` (${part.mime_type})` : ""}`);
    }
    const actions = ev.actions || {};
    if (actions.pause) {
      addBody(item, `paused: ${actions.pause.reason}\n${json(actions.pause.details, 2)}`);
    }
    if (actions.transfer_to_agent) addBody(item, `transfer to ${actions.transfer_to_agent}`);
    const delta = actions.state_delta || {};
    const keys = Object.keys(delta).filter((k) => !k.startsWith("adk_pause:"));
    if (keys.length) addBody(item, `state delta ${json(Object.fromEntries(keys.map((k) => [k, delta[k]])))}`);
    if (ev.error) addBody(item, `error ${ev.error.reason} (${ev.error.type})`);
    if (!parts.length && !actions.pause && !keys.length && !ev.error && !actions.transfer_to_agent) {
      item.querySelector(".tl-kind").textContent = "bookkeeping";
    }
  }

  // ---- session panel -----------------------------------------------------------------------------------------

  function sessionPath() {
    return `/sessions/${pathOf(APP_NAME, conversation.user, conversation.session)}`;
  }

  function showState(state) {
    const rows = $("state-rows");
    rows.replaceChildren();
    const keys = Object.keys(state || {}).filter((k) => !k.startsWith("adk_pause:")).sort();
    for (const key of keys) {
      const row = el("tr");
      row.append(el("td", "mono", key), el("td", "mono", json(state[key])));
      rows.append(row);
    }
    $("state-empty").hidden = keys.length > 0;
  }

  async function refreshSession(quiet) {
    if (!conversation.session) {
      setSession(null);
      await loadSessionList(quiet);
      return;
    }
    try {
      const session = await api("GET", `${sessionPath()}?max_events=1`);
      showState(session.state);
      const when = session.last_update_time ? new Date(session.last_update_time * 1000).toLocaleTimeString() : "?";
      $("session-meta").textContent = `${session.events_total} events · updated ${when} · user ${session.user_id}`;
    } catch (err) {
      if (!quiet) showMessage($("state-error"), describe(err));
    }
    await loadSessionList(quiet);
  }

  async function loadSessionList(quiet) {
    try {
      const query = `?app_name=${encodeURIComponent(APP_NAME)}&user_id=${encodeURIComponent(conversation.user)}&limit=20`;
      const page = await api("GET", `/sessions${query}`);
      const list = $("session-list");
      list.replaceChildren();
      for (const s of page.sessions || []) {
        const item = el("li");
        const button = el("button", "btn btn-quiet", s.session_id);
        button.type = "button";
        if (s.session_id === conversation.session) item.className = "current";
        button.addEventListener("click", () => openSession(s.session_id));
        item.append(button, el("span", "muted small", ` ${s.state_keys} ${s.state_keys === 1 ? "key" : "keys"}`));
        list.append(item);
      }
      if (!list.children.length) list.append(el("li", "muted small", "No sessions yet."));
    } catch (err) {
      if (!quiet) showMessage($("state-error"), describe(err));
    }
  }

  async function openSession(sessionId) {
    stopFollowing();
    clearChat();
    $("timeline").replaceChildren();
    setSession(sessionId);
    try {
      const session = await api("GET", `${sessionPath()}?max_events=${SESSION_EVENTS}`);
      chatNote(`Session ${sessionId} (${session.events_total} events; the newest ${SESSION_EVENTS} shown).`);
      for (const ev of session.events || []) {
        const parts = (ev.content && ev.content.parts) || [];
        const text = textOf(parts, false);
        if (ev.partial || !text) continue;
        chatLine(ev.author === "user" ? "msg-user" : "msg-agent", ev.author, text);
      }
    } catch (err) {
      chatNote(`Could not open the session: ${describe(err)}`, "failed");
    }
    refreshSession(false);
  }

  async function saveState(event) {
    event.preventDefault();
    showMessage($("state-error"), "");
    showMessage($("state-ok"), "");
    const key = $("state-key").value.trim();
    if (!conversation.session) {
      showMessage($("state-error"), "No session yet: send a message or open a session first.");
      return;
    }
    if (!key) {
      showMessage($("state-error"), "Enter a key.");
      return;
    }
    let value;
    try {
      value = JSON.parse($("state-value").value);
    } catch (err) {
      showMessage($("state-error"), `The value is not valid JSON (strings need quotes): ${err.message}`);
      return;
    }
    try {
      const result = await api("PATCH", `${sessionPath()}/state`, { delta: { [key]: value } });
      showState(result.state);
      showMessage($("state-ok"), `Saved ${key}.`);
      loadSessionList(true);
    } catch (err) {
      showMessage($("state-error"), `Refused: ${describe(err)}`);
    }
  }

  // ---- metrics -----------------------------------------------------------------------------------------------

  function formatNumber(value) {
    return typeof value === "number" && !Number.isInteger(value) ? value.toFixed(3) : String(value);
  }

  function seriesValue(instrument, series, unit) {
    if (series === null || typeof series !== "object") return json(series);
    if ("value" in series) return `${formatNumber(series.value)}${unit}`;
    if ("count" in series) {
      const parts = [`count ${series.count}`];
      if ("sum" in series) parts.push(`sum ${formatNumber(series.sum)}${unit}`);
      if ("max" in series && series.max !== null) parts.push(`max ${formatNumber(series.max)}${unit}`);
      return parts.join("\n");
    }
    return json(series);
  }

  async function refreshMetrics() {
    showMessage($("metrics-error"), "");
    try {
      const snapshot = await api("GET", "/observability");
      const rows = $("metrics-rows");
      rows.replaceChildren();
      const instruments = snapshot.instruments || {};
      for (const name of Object.keys(instruments).sort()) {
        const instrument = instruments[name] || {};
        const unit = instrument.unit && instrument.unit !== "1" ? ` ${instrument.unit}` : "";
        const series = Array.isArray(instrument.series) ? instrument.series : [];
        if (!series.length) {
          const row = el("tr");
          row.append(el("td", "mono", name), el("td", "muted", "—"), el("td", "muted", "no data"));
          rows.append(row);
        }
        series.forEach((s, index) => {
          const labels = Object.entries((s && typeof s === "object" && s.labels) || {})
            .map(([k, v]) => `${k}=${v}`)
            .join("\n");
          const row = el("tr", index ? "series-more" : null);
          row.append(
            el("td", "mono name", index ? "" : name),
            el("td", "mono", labels || "—"),
            el("td", "mono value", seriesValue(instrument, s, unit)),
          );
          rows.append(row);
        });
      }
      metricsLoaded = true;
      $("metrics-updated").textContent = `Updated ${new Date().toLocaleTimeString()} · ${Object.keys(instruments).length} instruments`;
    } catch (err) {
      showMessage($("metrics-error"), describe(err));
    }
  }

  // ---- MCP connections ---------------------------------------------------------------------------------------

  function serverLabel(info) {
    if (!info || typeof info !== "object") return "—";
    return [info.name, info.version].filter((part) => typeof part === "string" && part).join(" ") || "—";
  }

  async function refreshMcp() {
    showMessage($("mcp-error"), "");
    try {
      const page = await api("GET", "/mcp/connections");
      const rows = $("mcp-rows");
      rows.replaceChildren();
      const connections = Array.isArray(page.connections) ? page.connections : [];
      for (const c of connections) {
        const row = el("tr", "mcp-row");
        row.dataset.connectionId = c.connection_id;
        if (c.connection_id === mcpSelected) row.classList.add("selected");
        if (c.available === false) {
          row.append(el("td", "mono", c.connection_id), el("td", "muted", "not answering"));
          for (let i = 0; i < 5; i += 1) row.append(el("td", "muted", "—"));
        } else {
          const state = el("td");
          const badge = el("span");
          setBadge(badge, c.state === "open" ? "on" : "idle", c.state || "?");
          state.append(badge);
          row.append(
            el("td", "mono mcp-name", c.name || c.connection_id),
            el("td", null, c.transport),
            el("td", "mcp-server", serverLabel(c.server_info)),
            el("td", "mono", c.protocol_version || "—"),
            state,
            el("td", "num", Array.isArray(c.tools) ? c.tools.length : 0),
            el("td", "num", c.calls),
          );
          row.tabIndex = 0;
          row.title = c.transport === "http" ? c.url : `server pid ${c.server_pid}`;
          row.addEventListener("click", () => showMcpConnection(c.connection_id));
          row.addEventListener("keydown", (event) => {
            if (event.key === "Enter") showMcpConnection(c.connection_id);
          });
        }
        rows.append(row);
      }
      $("mcp-empty").hidden = connections.length > 0;
      const more = page.truncated ? " (more not shown)" : "";
      const count = `${connections.length} ${connections.length === 1 ? "connection" : "connections"}`;
      $("mcp-updated").textContent = `Updated ${new Date().toLocaleTimeString()} · ${count}${more}`;
      if (mcpSelected && !connections.some((c) => c.connection_id === mcpSelected)) {
        mcpSelected = null;
        $("mcp-detail").hidden = true;
      }
    } catch (err) {
      showMessage($("mcp-error"), describe(err));
    }
  }

  async function showMcpConnection(connectionId) {
    showMessage($("mcp-error"), "");
    mcpSelected = connectionId;
    for (const row of document.querySelectorAll("#mcp-rows tr")) {
      row.classList.toggle("selected", row.dataset.connectionId === connectionId);
    }
    try {
      const c = await api("GET", `/mcp/connections/${pathOf(connectionId)}`);
      if (mcpSelected !== connectionId) return;
      $("mcp-detail-name").textContent = c.name || connectionId;
      const where = c.transport === "http" ? c.url : `server pid ${c.server_pid}`;
      const changed = c.catalog_changed ? " · catalog changed since the last listing" : "";
      $("mcp-detail-meta").textContent = `${connectionId} · ${c.transport} · ${where} · ${c.in_flight} in flight${changed}`;
      const tools = $("mcp-tools");
      tools.replaceChildren();
      for (const tool of Array.isArray(c.tools) ? c.tools : []) {
        const item = el("li", "chip mcp-tool", tool.name);
        if (tool.description) item.title = tool.description;
        tools.append(item);
      }
      $("mcp-tools-empty").hidden = tools.children.length > 0;
      $("mcp-detail").hidden = false;
    } catch (err) {
      $("mcp-detail").hidden = true;
      showMessage($("mcp-error"), describe(err));
      if (err instanceof ApiError && err.status === 404) refreshMcp();
    }
  }

  // ---- triggers ------------------------------------------------------------------------------------------------

  const TRIGGER_COUNTS = ["accepted", "completed", "failed", "cancelled"];
  const TRIGGER_OTHER = ["duplicates", "rejected", "expired"];
  const TRIGGER_BADGES = { completed: "completed", failed: "failed", cancelled: "cancelled", expired: "failed" };

  function num(value) {
    return Number.isFinite(value) ? value : "—";
  }

  async function refreshTriggers() {
    showMessage($("triggers-error"), "");
    try {
      const page = await api("GET", "/triggers");
      const rows = $("triggers-rows");
      rows.replaceChildren();
      const triggers = Array.isArray(page.triggers) ? page.triggers : [];
      for (const t of triggers) {
        const row = el("tr", "trigger-row");
        row.dataset.trigger = t.name;
        if (t.name === triggerSelected) row.classList.add("selected");
        const depth = el("td", "num trigger-queue", `${num(t.queue_depth)} / ${num(t.max_queue)}`);
        const active = el("td", "num trigger-active", `${num(t.active)} / ${num(t.max_concurrency)}`);
        row.append(el("td", "mono trigger-name", t.name), depth, active);
        for (const key of TRIGGER_COUNTS) row.append(el("td", `num trigger-${key}`, num(t[key])));
        row.tabIndex = 0;
        row.addEventListener("click", () => showTrigger(t));
        row.addEventListener("keydown", (event) => {
          if (event.key === "Enter") showTrigger(t);
        });
        rows.append(row);
      }
      $("triggers-empty").hidden = triggers.length > 0;
      const count = `${triggers.length} ${triggers.length === 1 ? "trigger" : "triggers"}`;
      $("triggers-updated").textContent = `Updated ${new Date().toLocaleTimeString()} · ${count}`;
      const selected = triggers.find((t) => t.name === triggerSelected) || (triggers.length === 1 ? triggers[0] : null);
      if (selected) showTrigger(selected);
      else {
        triggerSelected = null;
        $("trigger-detail").hidden = true;
      }
    } catch (err) {
      showMessage($("triggers-error"), describe(err));
    }
  }

  function showTrigger(t) {
    triggerSelected = t.name;
    for (const row of document.querySelectorAll("#triggers-rows tr")) {
      row.classList.toggle("selected", row.dataset.trigger === t.name);
    }
    $("trigger-detail-name").textContent = t.name;
    const other = TRIGGER_OTHER.map((key) => `${num(t[key])} ${key}`);
    $("trigger-detail-meta").textContent = [`${t.mode} mode`, ...other].join(" · ");
    const rows = $("trigger-recent-rows");
    rows.replaceChildren();
    for (const r of Array.isArray(t.recent) ? t.recent : []) {
      const row = el("tr", "trigger-recent");
      const outcome = el("td");
      const badge = el("span");
      setBadge(badge, TRIGGER_BADGES[r.outcome] || "idle", r.outcome || "?");
      outcome.append(badge);
      const duration = Number.isFinite(r.duration_ms) ? `${r.duration_ms} ms` : "—";
      row.append(el("td", "mono", r.ref), outcome, el("td", "num", num(r.attempts)), el("td", "num", duration),
        el("td", "small trigger-reason", r.reason || ""));
      rows.append(row);
    }
    $("trigger-recent-empty").hidden = rows.children.length > 0;
    $("trigger-detail").hidden = false;
  }

  // ---- Live ----------------------------------------------------------------------------------------------------
  // Sessions an application started with the node's developer Live principal. The panel never starts one; it reads
  // a session's future events (no replay: no Last-Event-ID) and sends text. Audio shows only its size.

  const LIVE_BADGES = { active: "on", connecting: "starting", resuming: "reconnecting", closing: "paused", closed: "off" };
  const MAX_LIVE_LOG = 300;

  async function refreshLive() {
    showMessage($("live-error"), "");
    try {
      const page = await api("GET", "/live/sessions");
      const rows = $("live-rows");
      rows.replaceChildren();
      const sessions = Array.isArray(page.sessions) ? page.sessions : [];
      for (const s of sessions) {
        const row = el("tr", "live-row");
        row.dataset.session = s.session_id;
        const state = el("td");
        const badge = el("span");
        setBadge(badge, LIVE_BADGES[s.state] || "idle", s.state || "?");
        state.append(badge);
        const audio = `${num(s.audio_in_bytes)} / ${num(s.audio_out_bytes)}`;
        const name = el("td", "live-name");
        name.append(el("div", "mono", s.session_id), el("div", "muted small live-model", s.model));
        row.append(name, state, el("td", "num live-subscribers", num(s.subscribers)),
          el("td", "num live-resumes", num(s.resumes)), el("td", "num live-inputs", num(s.inputs)),
          el("td", "num live-audio", audio));
        row.tabIndex = 0;
        row.addEventListener("click", () => showLive(s));
        row.addEventListener("keydown", (event) => {
          if (event.key === "Enter") showLive(s);
        });
        rows.append(row);
      }
      $("live-empty").hidden = sessions.length > 0;
      const count = `${sessions.length} ${sessions.length === 1 ? "session" : "sessions"}`;
      $("live-updated").textContent = `Updated ${new Date().toLocaleTimeString()} · ${count}`;
      const selected = liveFollow && sessions.find((s) => s.session_id === liveFollow.sessionId);
      if (selected) showLive(selected, false);
      else if (liveFollow === null && sessions.length === 1) showLive(sessions[0]);
      markLiveRow();
    } catch (err) {
      showMessage($("live-error"), describe(err));
      $("live-empty").hidden = true;
    }
  }

  function markLiveRow() {
    const current = liveFollow ? liveFollow.sessionId : null;
    for (const row of document.querySelectorAll("#live-rows tr")) {
      row.classList.toggle("selected", row.dataset.session === current);
    }
  }

  function showLive(s, follow = true) {
    $("live-detail-id").textContent = s.session_id;
    const meta = [`${s.state}`, `model ${s.model}`, `${num(s.subscribers)} subscribers`, `${num(s.resumes)} resumes`,
      `${num(s.inputs)} inputs`, `event ${num(s.last_seq)}`];
    $("live-detail-meta").textContent = meta.join(" · ");
    $("live-voice-link").href = `/dev/voice?session=${encodeURIComponent(s.session_id)}`;
    $("live-detail").hidden = false;
    if (follow && (!liveFollow || liveFollow.sessionId !== s.session_id)) followLive(s.session_id);
    markLiveRow();
  }

  function stopLive() {
    if (liveFollow) liveFollow.controller.abort();
    liveFollow = null;
  }

  function setLiveState(f, kind, text) {
    if (liveFollow === f) setBadge($("live-stream-state"), kind, text);
  }

  // Read the session's events until its terminal event. A stream that reaches the edge's bound is opened again at
  // once; what happened in between is not replayed (Live has no replay), so the log says so.
  function followLive(sessionId) {
    stopLive();
    $("live-log").replaceChildren();
    liveOpen = {};
    showMessage($("live-send-error"), "");
    const f = { sessionId, controller: new AbortController(), done: false };
    liveFollow = f;
    liveLoop(f);
  }

  async function liveLoop(f) {
    let failures = 0;
    while (!f.done && liveFollow === f) {
      setLiveState(f, "starting", "connecting");
      let progressed = false;
      try {
        const response = await fetch(`${API}/live/sessions/${pathOf(f.sessionId)}/events`, {
          headers: authHeaders({ Accept: "text/event-stream" }),
          signal: f.controller.signal,
          cache: "no-store",
          credentials: "omit",
        });
        if (!response.ok) {
          const error = await errorOf(response);
          if (response.status === 401) refused(error);
          if (response.status < 500) {
            f.done = true;
            setLiveState(f, "off", "not following");
            liveNote(`Cannot follow ${f.sessionId}: ${error.describe()}`, "error");
            return;
          }
          throw error;
        }
        for await (const message of sseMessages(response.body.getReader())) {
          if (liveFollow !== f) return;
          let data = null;
          try {
            data = JSON.parse(message.data);
          } catch (err) {
            continue;
          }
          if (message.event === "subscribed") {
            liveOpen = {}; // a new connection: what came before it is not continued
            progressed = true;
            setLiveState(f, "on", "following");
          } else if (message.event === "live") {
            liveEvent(data);
            if (data.kind === "terminal") {
              f.done = true;
              setLiveState(f, "off", "ended");
              return;
            }
          } else if (message.event === "bound") {
            liveNote("The stream reached its bound and reconnected: events in between are not shown.");
            break;
          } else if (message.event === "error") {
            liveNote(`The stream ended: ${data.reason}.`, "error");
            break;
          }
        }
      } catch (err) {
        if (liveFollow !== f || f.controller.signal.aborted) return;
      }
      if (f.done || liveFollow !== f) return;
      failures = progressed ? 0 : failures + 1;
      if (failures > MAX_STREAM_RETRIES) {
        setLiveState(f, "off", "disconnected");
        liveNote(`Lost the event stream of ${f.sessionId}; select the session again to retry.`, "error");
        return;
      }
      setLiveState(f, "reconnecting", "reconnecting");
      if (failures) await delay(Math.min(250 * 2 ** failures, 4000), f.controller.signal);
    }
  }

  function liveAppend(item) {
    const log = $("live-log");
    const atBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 40;
    log.append(item);
    while (log.children.length > MAX_LIVE_LOG) log.firstElementChild.remove();
    if (atBottom) log.scrollTop = log.scrollHeight;
  }

  function liveNote(text, kind) {
    const item = el("li", `tl tl-note${kind ? ` tl-${kind}` : ""}`);
    item.append(el("div", "tl-head", text));
    liveAppend(item);
  }

  const LIVE_TEXT_KINDS = new Set(["text", "thought", "output_transcription", "input_transcription"]);

  // Within one stretch of streaming (until an event of another kind, such as turn_complete), the audio chunks and
  // the streamed pieces of each text kind are folded into one line per kind.
  let liveOpen = {};

  function liveEvent(ev) {
    const foldable = ev.kind === "audio" || LIVE_TEXT_KINDS.has(ev.kind);
    if (!foldable) liveOpen = {};
    const last = foldable ? liveOpen[ev.kind] : null;
    if (last && last.isConnected) {
      last.dataset.seq = ev.seq;
      last.querySelector(".tl-seq").textContent = `#${ev.seq}`;
      if (ev.kind === "audio") {
        last.dataset.chunks = String(Number(last.dataset.chunks) + 1);
        last.dataset.bytes = String(Number(last.dataset.bytes) + (ev.bytes || 0));
        last.querySelector(".tl-body").textContent = `${last.dataset.chunks} chunks · ${last.dataset.bytes} bytes`;
      } else {
        const body = last.querySelector(".tl-body");
        body.textContent += (ev.payload && ev.payload.text) || "";
      }
      return;
    }
    const item = el("li", `tl tl-${ev.kind} live-event`);
    item.dataset.kind = ev.kind;
    item.dataset.seq = ev.seq;
    const head = el("div", "tl-head");
    head.append(el("span", "tl-seq", `#${ev.seq}`), el("span", "tl-kind", ev.kind));
    item.append(head);
    let body = null;
    if (ev.kind === "audio") {
      item.dataset.chunks = "1";
      item.dataset.bytes = String(ev.bytes || 0);
      body = `1 chunk · ${ev.bytes || 0} bytes`;
    } else if (LIVE_TEXT_KINDS.has(ev.kind)) {
      body = (ev.payload && ev.payload.text) || "";
    } else if (ev.payload && Object.keys(ev.payload).length) {
      body = json(ev.payload, 2);
    }
    if (body !== null) item.append(el("pre", "tl-body", body));
    if (foldable) liveOpen[ev.kind] = item;
    liveAppend(item);
  }

  async function sendLive(event) {
    event.preventDefault();
    const input = $("live-text");
    const text = input.value.trim();
    showMessage($("live-send-error"), "");
    if (!text || !liveFollow) return;
    $("live-send").disabled = true;
    try {
      const sent = await api("POST", `/live/sessions/${pathOf(liveFollow.sessionId)}/text`, { text });
      liveNote(`Sent text as input #${sent.input_seq}: ${text}`);
      input.value = "";
    } catch (err) {
      showMessage($("live-send-error"), describe(err));
    } finally {
      $("live-send").disabled = false;
    }
  }

  // ---- A2A -----------------------------------------------------------------------------------------------------

  const A2A_BADGES = {
    TASK_STATE_COMPLETED: "completed",
    TASK_STATE_WORKING: "running",
    TASK_STATE_SUBMITTED: "starting",
    TASK_STATE_INPUT_REQUIRED: "paused",
    TASK_STATE_AUTH_REQUIRED: "paused",
    TASK_STATE_CANCELED: "cancelled",
  };

  async function refreshA2a() {
    showMessage($("a2a-error"), "");
    try {
      const info = await api("GET", "/a2a");
      $("a2a-off").hidden = info.enabled;
      $("a2a-on").hidden = !info.enabled;
      if (!info.enabled) {
        $("a2a-updated").textContent = `Updated ${new Date().toLocaleTimeString()}`;
        return;
      }
      const card = info.card || {};
      const iface = (card.supportedInterfaces || [])[0] || {};
      $("a2a-card").textContent = `${card.name || "?"} · A2A ${iface.protocolVersion || "?"} at ${iface.url || "?"}`;
      const st = info.status || {};
      $("a2a-counts").textContent =
        `${st.tasks} tasks (${st.active} active) · ${st.streams} open streams · auth ${st.auth}`;
      const page = await api("GET", "/a2a/tasks");
      const rows = $("a2a-rows");
      rows.replaceChildren();
      const tasks = Array.isArray(page.tasks) ? page.tasks : [];
      for (const t of tasks) {
        const row = el("tr", "a2a-row");
        row.dataset.taskId = t.id;
        const short = (id) => {
          const cell = el("td", "mono", `${String(id).slice(0, 8)}…`);
          cell.title = id;
          return cell;
        };
        const state = el("td");
        const badge = el("span");
        setBadge(badge, A2A_BADGES[t.state] || "failed", String(t.state || "?").replace("TASK_STATE_", "").toLowerCase());
        state.append(badge);
        row.append(
          short(t.id),
          short(t.contextId),
          state,
          el("td", "small", String(t.timestamp).replace("T", " ").slice(0, 19)),
          el("td", "num", t.runs),
          el("td", "num", t.artifacts),
        );
        rows.append(row);
      }
      $("a2a-empty").hidden = tasks.length > 0;
      $("a2a-updated").textContent = `Updated ${new Date().toLocaleTimeString()} · ${tasks.length} tasks`;
    } catch (err) {
      showMessage($("a2a-error"), describe(err));
    }
  }

  // ---- Resources: memory and artifacts of one exact scope ----------------------------------------------------

  const resources = { app: "", user: "", session: "", cursor: null, name: null, pending: null };

  function scopeOf(prefix) {
    return {
      app: $(`${prefix}-app`).value.trim(),
      user: $(`${prefix}-user`).value.trim(),
      session: $(`${prefix}-session`).value.trim(),
    };
  }

  async function loadResources(event) {
    if (event) event.preventDefault();
    showMessage($("res-error"), "");
    Object.assign(resources, scopeOf("res"), { cursor: null, name: null, pending: null });
    $("art-detail").hidden = true;
    $("art-rows").replaceChildren();
    $("mem-rows").replaceChildren();
    try {
      const info = await api("GET", `/memory/${pathOf(resources.app, resources.user)}`);
      const limits = info.limits || {};
      $("mem-info").textContent =
        `${info.entries} entries · ${info.adapter} adapter, ${info.search} search · at most ${limits.max_results} hits`;
    } catch (err) {
      $("mem-info").textContent = describe(err);
    }
    if (resources.session) await loadArtifactNames();
  }

  async function loadArtifactNames() {
    try {
      const query = new URLSearchParams({ limit: "20" });
      if (resources.cursor) query.set("cursor", resources.cursor);
      const page = await api("GET", `/artifacts/${pathOf(resources.app, resources.user, resources.session)}?${query}`);
      const names = Array.isArray(page.names) ? page.names : [];
      for (const name of names) {
        const row = el("tr", "art-row");
        row.append(el("td", "mono", name));
        row.tabIndex = 0;
        row.addEventListener("click", () => showVersions(name));
        $("art-rows").append(row);
      }
      resources.cursor = page.next_cursor || null;
      $("art-more").hidden = !resources.cursor;
      $("art-empty").hidden = $("art-rows").children.length > 0;
    } catch (err) {
      showMessage($("res-error"), describe(err));
    }
  }

  async function showVersions(name) {
    resources.name = name;
    $("art-confirm").hidden = true;
    showMessage($("art-ok"), "");
    try {
      const query = new URLSearchParams({ name, limit: "100" });
      const page = await api("GET", `/artifacts/${pathOf(resources.app, resources.user, resources.session)}/versions?${query}`);
      const rows = $("ver-rows");
      rows.replaceChildren();
      const selector = $("art-selector");
      selector.replaceChildren(el("option", null, "latest"), el("option", null, "all"));
      for (const v of Array.isArray(page.versions) ? page.versions : []) {
        const row = el("tr", "ver-row");
        const created = new Date(Number(v.created_at) * 1000).toLocaleString();
        row.append(
          el("td", "mono", v.version),
          el("td", "mono", v.size),
          el("td", "mono", v.mime_type),
          el("td", "mono", String(v.digest || "").slice(0, 19)),
          el("td", "mono", created),
        );
        rows.append(row);
        selector.append(el("option", null, String(v.version)));
      }
      $("art-name").textContent = name;
      $("art-detail").hidden = false;
    } catch (err) {
      showMessage($("res-error"), describe(err));
    }
  }

  function askDelete() {
    const selector = $("art-selector").value;
    resources.pending = {
      app_name: resources.app,
      user_id: resources.user,
      session_id: resources.session,
      name: resources.name,
      selector,
    };
    $("art-confirm-json").textContent = JSON.stringify(resources.pending, null, 1);
    $("art-confirm").hidden = false;
  }

  async function confirmDelete() {
    const confirmation = resources.pending;
    if (!confirmation) return;
    $("art-confirm").hidden = true;
    resources.pending = null;
    try {
      const done = await api(
        "POST",
        `/artifacts/${pathOf(resources.app, resources.user, resources.session)}/delete`,
        { name: confirmation.name, selector: confirmation.selector, confirmation },
      );
      showMessage($("art-ok"), `Deleted ${done.deleted} version(s) of ${confirmation.name}.`);
      await showVersions(confirmation.name);
      showMessage($("art-ok"), `Deleted ${done.deleted} version(s) of ${confirmation.name}.`);
    } catch (err) {
      showMessage($("res-error"), describe(err));
    }
  }

  async function searchMemory(event) {
    if (event) event.preventDefault();
    showMessage($("res-error"), "");
    try {
      const found = await api("POST", `/memory/${pathOf(resources.app, resources.user)}/search`, {
        query: $("mem-query").value,
        limit: 10,
      });
      const rows = $("mem-rows");
      rows.replaceChildren();
      for (const hit of Array.isArray(found.hits) ? found.hits : []) {
        const row = el("tr", "mem-row");
        const metadata = Object.entries(hit.metadata || {}).map(([k, v]) => `${k}=${v}`).join(" ");
        row.append(
          el("td", "mono", hit.rank),
          el("td", null, hit.content.length > 240 || hit.content_truncated ? `${hit.content.slice(0, 240)} …` : hit.content),
          el("td", "mono", hit.session_id || "—"),
          el("td", "mono", metadata || "—"),
        );
        rows.append(row);
      }
      if (!rows.children.length) {
        const row = el("tr");
        row.append(el("td", "muted", "—"), el("td", "muted", "no hit"), el("td"), el("td"));
        rows.append(row);
      }
    } catch (err) {
      showMessage($("res-error"), describe(err));
    }
  }

  // ---- Context: explanation, lifecycle and cache invalidation ------------------------------------------------

  const context = { pending: null, fingerprint: null, scope: null };

  function showFields(fields) {
    const rows = $("ctx-rows");
    rows.replaceChildren();
    for (const [key, value] of fields) {
      const row = el("tr");
      const text = value === null || value === undefined ? "—" : typeof value === "object" ? JSON.stringify(value) : value;
      row.append(el("td", "mono", key), el("td", "mono", text));
      rows.append(row);
    }
  }

  async function explainContext(event) {
    if (event) event.preventDefault();
    showMessage($("ctx-error"), "");
    $("ctx-cache").hidden = true;
    const s = scopeOf("ctx");
    try {
      const found = await api("GET", `/context/${pathOf(s.app, s.user, s.session)}`);
      const history = found.history || {};
      showFields([
        ["events", found.events_total],
        ["state keys", found.state_keys],
        ["history selected", history.selected],
        ["history dropped", history.dropped],
        ["history bytes", history.bytes],
        ["tokens (estimate)", history.tokens_estimate],
        ["fingerprint", history.fingerprint],
        ["compaction", found.compaction],
      ]);
    } catch (err) {
      showMessage($("ctx-error"), describe(err));
    }
  }

  async function contextLifecycle() {
    showMessage($("ctx-error"), "");
    showMessage($("ctx-ok"), "");
    $("ctx-confirm").hidden = true;
    const s = scopeOf("ctx");
    const model = $("ctx-model").value.trim();
    try {
      const query = new URLSearchParams({ model });
      const found = await api("GET", `/context/${pathOf(s.app, s.user, s.session)}/lifecycle?${query}`);
      const cache = found.cache || {};
      const compaction = found.compaction || {};
      showFields([
        ["compaction through seq", compaction.through_seq],
        ["folded events", compaction.folded_events],
        ["summary bytes", compaction.summary_bytes],
        ["compressor", compaction.compressor],
        ...Object.entries(cache.counts || {}).map(([k, v]) => [`cache ${k}`, v]),
      ]);
      context.fingerprint = cache.scope_fingerprint;
      context.scope = { ...s, model };
      $("ctx-fingerprint").textContent = cache.scope_fingerprint;
      $("ctx-cache").hidden = false;
    } catch (err) {
      showMessage($("ctx-error"), describe(err));
    }
  }

  function askInvalidate() {
    const s = context.scope;
    if (!s || !context.fingerprint) return;
    context.pending = {
      app_name: s.app,
      user_id: s.user,
      session_id: s.session,
      model: s.model,
      scope_fingerprint: context.fingerprint,
    };
    $("ctx-confirm-json").textContent = JSON.stringify(context.pending, null, 1);
    $("ctx-confirm").hidden = false;
  }

  async function confirmInvalidate() {
    const confirmation = context.pending;
    if (!confirmation) return;
    context.pending = null;
    $("ctx-confirm").hidden = true;
    try {
      const path = `/context/${pathOf(confirmation.app_name, confirmation.user_id, confirmation.session_id)}/cache/invalidate`;
      const done = await api("POST", path, { model: confirmation.model, confirmation });
      showMessage($("ctx-ok"), `Invalidated ${done.invalidated} cache entr${done.invalidated === 1 ? "y" : "ies"}.`);
    } catch (err) {
      showMessage($("ctx-error"), describe(err));
    }
  }

  // ---- Evaluation: render a saved result or comparison, compare two results --------------------------------------

  const MAX_EVAL_FILE_BYTES = 64 * 1024 * 1024;
  const evaluation = { shown: null }; // the document the panel shows (what the HTML download renders)
  const EVAL_BADGES = { passed: "badge-completed", failed: "badge-failed", error: "badge-paused", cancelled: "badge-cancelled" };

  function evalJson(id, what) {
    const text = $(id).value.trim();
    if (!text) throw new ApiError(0, "missing_document", `paste or upload ${what} first`);
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new ApiError(0, "invalid_json", `${what} is not valid JSON`);
    }
  }

  function percent(value) {
    return typeof value === "number" ? `${(value * 100).toFixed(1)}%` : "—";
  }

  function evalRow(first, status, rate) {
    const row = el("tr", "eval-row");
    const badge = el("span", `badge ${EVAL_BADGES[status] || ""}`, status);
    const cell = el("td");
    cell.append(badge);
    row.append(el("td", "mono", first), cell, el("td", null, rate));
    return row;
  }

  function showEvaluation(rendered) {
    const summary = rendered.summary || {};
    const rows = $("eval-rows");
    rows.replaceChildren();
    let status;
    if (rendered.kind === "comparison") {
      status = summary.passed ? "passed" : "failed";
      const rates = summary.pass_rate || {};
      $("eval-headline").textContent =
        `comparison: pass rate ${percent(rates.baseline)} → ${percent(rates.current)}` + (summary.same_set ? "" : " (different sets)");
      $("eval-col-1").textContent = "what";
      rows.append(evalRow("pass rate", rates.drop > 0 ? "failed" : "passed", `drop ${percent(rates.drop)}`));
      for (const metric of summary.regressed_metrics || []) rows.append(evalRow(`metric ${metric}`, "failed", "regressed"));
      for (const [key, count] of Object.entries(summary.cases || {})) rows.append(evalRow(`cases ${key}`, key === "regressed" && count ? "failed" : "passed", String(count)));
      $("eval-status").textContent = summary.passed ? "passed" : "regressed";
    } else {
      status = summary.status;
      const counts = summary.counts || {};
      $("eval-headline").textContent =
        `${summary.eval_set}: pass rate ${percent(summary.pass_rate)} — ${counts.passed} of ${counts.cases} cases passed`;
      $("eval-col-1").textContent = "case";
      for (const c of summary.cases || []) rows.append(evalRow(c.case_id, c.status, percent(c.pass_rate)));
      if (summary.cases_total > (summary.cases || []).length) {
        rows.append(evalRow(`… ${summary.cases_total - summary.cases.length} more`, "", ""));
      }
      $("eval-status").textContent = status;
    }
    $("eval-status").className = `badge ${EVAL_BADGES[status] || ""}`;
    $("eval-markdown").textContent = rendered.markdown || "";
    $("eval-out").hidden = false;
  }

  async function renderEvaluation() {
    showMessage($("eval-error"), "");
    showMessage($("eval-ok"), "");
    try {
      const doc = evalJson("eval-input", "a result");
      showEvaluation(await api("POST", "/evaluation/render", doc));
      evaluation.shown = doc;
    } catch (err) {
      showMessage($("eval-error"), describe(err));
    }
  }

  async function compareEvaluation() {
    showMessage($("eval-error"), "");
    showMessage($("eval-ok"), "");
    try {
      const current = evalJson("eval-input", "the current result");
      const baseline = evalJson("eval-baseline", "the baseline result");
      const drop = Number($("eval-drop").value || "0");
      const comparison = await api("POST", "/evaluation/compare", { baseline, current, options: { max_pass_rate_drop: drop } });
      showEvaluation(await api("POST", "/evaluation/render", comparison));
      evaluation.shown = comparison;
    } catch (err) {
      showMessage($("eval-error"), describe(err));
    }
  }

  async function downloadReport() {
    showMessage($("eval-error"), "");
    showMessage($("eval-ok"), "");
    try {
      const doc = evaluation.shown || evalJson("eval-input", "a result");
      if (token === null) throw new ApiError(0, "not_connected", "connect with a token first");
      let response;
      try {
        response = await fetch(`${API}/evaluation/render?format=html`, {
          method: "POST",
          headers: authHeaders({ "Content-Type": "application/json" }),
          body: JSON.stringify(doc),
          cache: "no-store",
          credentials: "omit",
        });
      } catch (err) {
        throw new ApiError(0, "network_error", "the node did not answer");
      }
      if (!response.ok) throw await errorOf(response);
      const blob = await response.blob();
      const link = el("a");
      link.href = URL.createObjectURL(blob);
      link.download = "eval-report.html";
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(link.href), 60000);
      showMessage($("eval-ok"), `HTML report ready (${blob.size} bytes): eval-report.html`);
    } catch (err) {
      showMessage($("eval-error"), describe(err));
    }
  }

  function loadEvalFile(input, target) {
    const file = input.files && input.files[0];
    if (!file) return;
    if (file.size > MAX_EVAL_FILE_BYTES) {
      showMessage($("eval-error"), `the file is larger than ${MAX_EVAL_FILE_BYTES} bytes`);
      return;
    }
    file.text().then((text) => {
      $(target).value = text;
      evaluation.shown = null;
    }, () => showMessage($("eval-error"), "the file cannot be read"));
  }

  // ---- tabs and wiring ---------------------------------------------------------------------------------------

  function openTab(button) {
    for (const tab of document.querySelectorAll(".tab")) {
      const active = tab === button;
      tab.classList.toggle("active", active);
      tab.setAttribute("aria-selected", String(active));
      $(tab.dataset.panel).hidden = !active;
    }
    if (button.id === "tab-session") refreshSession(false);
    if (button.id === "tab-metrics" && !metricsLoaded) refreshMetrics();
    if (button.id === "tab-mcp") refreshMcp();
    if (button.id === "tab-a2a") refreshA2a();
    if (button.id === "tab-triggers") refreshTriggers();
    if (button.id === "tab-live") refreshLive();
  }

  function wire() {
    $("connect-form").addEventListener("submit", connect);
    $("disconnect").addEventListener("click", leaveApp);
    $("agent-select").addEventListener("change", showAgent);
    $("agents-refresh").addEventListener("click", reloadAgents);
    $("user-input").addEventListener("change", () => {
      const user = $("user-input").value.trim() || "dev-user";
      $("user-input").value = user;
      if (user === conversation.user) return;
      conversation.user = user;
      setSession(null);
      clearChat();
      refreshSession(true);
    });
    $("new-session").addEventListener("click", () => {
      stopFollowing();
      setSession(null);
      clearChat();
      $("timeline").replaceChildren();
      chatNote("New session: it starts with your next message.");
    });
    $("chat-form").addEventListener("submit", send);
    $("chat-input").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        if (!$("send-btn").disabled) send();
      }
    });
    $("cancel-btn").addEventListener("click", cancelRun);
    $("reconnect-btn").addEventListener("click", reconnect);
    $("approve-btn").addEventListener("click", () => resume({ confirmed: true }));
    $("reject-btn").addEventListener("click", () => resume({ confirmed: false }));
    $("long-running-btn").addEventListener("click", answerLongRunning);
    $("timeline-clear").addEventListener("click", () => $("timeline").replaceChildren());
    $("session-refresh").addEventListener("click", () => refreshSession(false));
    $("state-form").addEventListener("submit", saveState);
    $("metrics-refresh").addEventListener("click", refreshMetrics);
    $("mcp-refresh").addEventListener("click", refreshMcp);
    $("a2a-refresh").addEventListener("click", refreshA2a);
    $("triggers-refresh").addEventListener("click", refreshTriggers);
    $("live-refresh").addEventListener("click", refreshLive);
    $("live-form").addEventListener("submit", sendLive);
    $("live-log-clear").addEventListener("click", () => $("live-log").replaceChildren());
    $("res-scope").addEventListener("submit", loadResources);
    $("mem-search").addEventListener("submit", searchMemory);
    $("art-more").addEventListener("click", loadArtifactNames);
    $("art-delete").addEventListener("click", askDelete);
    $("art-confirm-btn").addEventListener("click", confirmDelete);
    $("art-cancel-btn").addEventListener("click", () => { resources.pending = null; $("art-confirm").hidden = true; });
    $("ctx-scope").addEventListener("submit", explainContext);
    $("ctx-lifecycle").addEventListener("click", contextLifecycle);
    $("ctx-invalidate").addEventListener("click", askInvalidate);
    $("ctx-confirm-btn").addEventListener("click", confirmInvalidate);
    $("ctx-cancel-btn").addEventListener("click", () => { context.pending = null; $("ctx-confirm").hidden = true; });
    $("eval-render").addEventListener("click", renderEvaluation);
    $("eval-compare").addEventListener("click", compareEvaluation);
    $("eval-html").addEventListener("click", downloadReport);
    $("eval-input").addEventListener("input", () => { evaluation.shown = null; });
    $("eval-file").addEventListener("change", () => loadEvalFile($("eval-file"), "eval-input"));
    $("eval-baseline-file").addEventListener("change", () => loadEvalFile($("eval-baseline-file"), "eval-baseline"));
    for (const tab of document.querySelectorAll(".tab")) tab.addEventListener("click", () => openTab(tab));
    setSession(null);
    $("token-input").focus();
  }

  wire();
})();
