// adk_actors voice page: microphone -> Live session -> speaker, over the voice bridge's WebSocket
// (/dev/v1/live/sessions/{id}/voice, frames of adk_actors.live.voice_protocol v1). Plain ES2020, no dependencies.
//
// * Up: an AudioWorklet (voice-worklet.js) makes 20 ms frames of 16 kHz s16le PCM; each is sent as an audio frame
//   with sequences from 1 (a frame the socket cannot take at once is skipped, never renumbered).
// * Down: audio (129) is scheduled as AudioBuffers back to back and ACKed once scheduled, with at most
//   MAX_SCHEDULED_S seconds scheduled: a frame beyond that waits unACKed (the bridge's credit holds the rest back)
//   until playback drains. Transcriptions (130) and lifecycle frames (131) are shown and ACKed; an interruption
//   (lifecycle 4) stops every scheduled source at once and drops (ACKing) the waiting audio.
// * The token is read from its field when the socket opens, sent only as a WebSocket subprotocol, then forgotten.
//   Server text is put on the page with textContent only.
"use strict";

(() => {
  const SUBPROTOCOL = "adk.voice.v1";
  const BEARER_PREFIX = "adk.bearer.";
  const INPUT_RATE = 16000;
  const FRAME_SAMPLES = 320; // 20 ms at 16 kHz
  const MAX_SCHEDULED_S = 2.0;
  const START_LEAD_S = 0.1; // a small jitter buffer: the next chunk is scheduled before the current one ends
  const MAX_BUFFERED_BYTES = 64 * 1024;
  const LIFECYCLE = {
    1: "active",
    2: "generation_complete",
    3: "turn_complete",
    4: "interrupted",
    5: "reconnect_required",
    6: "resumed",
    7: "closed",
    8: "error",
  };
  const MAX_LOG = 200;

  const $ = (id) => document.getElementById(id);
  const decoder = new TextDecoder();
  const counters = {};
  let ws = null;
  let context = null;
  let stream = null;
  let capture = null;
  let sourceNode = null;
  let sinkNode = null;
  let seq = 0;
  let playHead = 0;
  const playing = new Set();
  const waiting = [];
  const turn = { input: null, output: null };

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function bump(name, by = 1) {
    counters[name] = (counters[name] || 0) + by;
    $(name).textContent = String(counters[name]);
  }

  function showError(text) {
    $("voice-error").textContent = text || "";
    $("voice-error").hidden = !text;
  }

  function setState(kind, text) {
    const badge = $("voice-state");
    badge.className = `badge badge-${kind}`;
    badge.textContent = text;
  }

  function log(text, kind) {
    const list = $("voice-log");
    const item = el("li", `tl tl-${kind || "note"}`);
    item.append(el("div", "tl-head", text));
    list.append(item);
    while (list.children.length > MAX_LOG) list.firstElementChild.remove();
    list.scrollTop = list.scrollHeight;
  }

  function base64url(text) {
    let binary = "";
    for (const byte of new TextEncoder().encode(text)) binary += String.fromCharCode(byte);
    return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  // ---- up: microphone frames ---------------------------------------------------------------------------------

  function sendAudio(pcm) {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    if (ws.bufferedAmount > MAX_BUFFERED_BYTES) return; // the network lags: skip this frame, keep the numbering
    seq += 1;
    const bytes = new Uint8Array(pcm);
    const frame = new Uint8Array(15 + bytes.length);
    const view = new DataView(frame.buffer);
    view.setUint8(0, 1);
    view.setUint8(1, 1);
    view.setBigUint64(2, BigInt(seq));
    view.setUint32(10, INPUT_RATE);
    view.setUint8(14, 1);
    frame.set(bytes, 15);
    ws.send(frame.buffer);
    bump("frames-sent");
  }

  function ack(frameSeq) {
    if (!ws || ws.readyState !== WebSocket.OPEN || frameSeq <= 0) return;
    const frame = new Uint8Array(10);
    const view = new DataView(frame.buffer);
    view.setUint8(0, 1);
    view.setUint8(1, 3);
    view.setBigUint64(2, BigInt(frameSeq));
    ws.send(frame.buffer);
    bump("acks-sent");
  }

  // ---- down: playback ----------------------------------------------------------------------------------------

  function scheduledAhead() {
    return context ? Math.max(0, playHead - context.currentTime) : 0;
  }

  function showPlayback() {
    $("scheduled-ms").textContent = String(Math.round(scheduledAhead() * 1000));
    $("playing-sources").textContent = String(playing.size);
  }

  function schedule(item) {
    const view = new DataView(item.pcm);
    const count = Math.floor(item.pcm.byteLength / 2);
    if (count === 0) return;
    const buffer = context.createBuffer(1, count, item.rate);
    const samples = buffer.getChannelData(0);
    for (let i = 0; i < count; i += 1) samples[i] = view.getInt16(i * 2, true) / 32768;
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const at = Math.max(context.currentTime + START_LEAD_S, playHead);
    source.start(at);
    playHead = at + buffer.duration;
    playing.add(source);
    source.onended = () => {
      playing.delete(source);
      drain();
    };
  }

  // Schedule waiting audio while less than MAX_SCHEDULED_S is ahead; ACK each frame once it is scheduled.
  function drain() {
    while (waiting.length && context && scheduledAhead() < MAX_SCHEDULED_S) {
      const item = waiting.shift();
      schedule(item);
      ack(item.seq);
    }
    showPlayback();
  }

  function interrupt() {
    let cancelled = 0;
    for (const source of playing) {
      source.onended = null;
      try {
        source.stop();
      } catch (err) {
        // already stopped
      }
      cancelled += 1;
    }
    playing.clear();
    for (const item of waiting.splice(0)) ack(item.seq); // dropped unplayed: their credit goes back
    playHead = context ? context.currentTime : 0;
    bump("interruptions");
    bump("cancelled-sources", cancelled);
    showPlayback();
    log(`interrupted: ${cancelled} scheduled sources stopped`, "interrupted");
  }

  // ---- frames from the bridge --------------------------------------------------------------------------------

  function transcript(direction, text, finished) {
    const key = direction === 1 ? "input" : "output";
    if (!turn[key]) {
      turn[key] = el("li", `voice-${key}`, "");
      $(`${key}-transcript`).append(turn[key]);
    }
    turn[key].textContent += text;
    if (finished && key === "input") turn.input = null;
  }

  function lifecycle(code, reason) {
    const name = LIFECYCLE[code] || `code ${code}`;
    if (code === 4) {
      interrupt();
      turn.output = null;
      return;
    }
    if (code === 3) {
      bump("turns");
      turn.output = null;
      turn.input = null;
    }
    if (code === 8) {
      showError(`the bridge refused a frame: ${reason}`);
      log(`error: ${reason}`, "error");
      return;
    }
    log(reason ? `${name}: ${reason}` : name, code === 7 ? "error" : "note");
  }

  function onFrame(event) {
    const data = event.data;
    if (!(data instanceof ArrayBuffer) || data.byteLength < 10) return;
    const view = new DataView(data);
    if (view.getUint8(0) !== 1) return;
    const type = view.getUint8(1);
    const frameSeq = Number(view.getBigUint64(2));
    bump("frames-received");
    if (type === 129 && data.byteLength >= 15) {
      bump("audio-received");
      waiting.push({ seq: frameSeq, rate: view.getUint32(10), pcm: data.slice(15) });
      drain();
    } else if (type === 130 && data.byteLength >= 12) {
      transcript(view.getUint8(10), decoder.decode(new Uint8Array(data, 12)), view.getUint8(11) === 1);
      ack(frameSeq);
    } else if (type === 131 && data.byteLength >= 11) {
      lifecycle(view.getUint8(10), decoder.decode(new Uint8Array(data, 11)));
      ack(frameSeq);
    }
  }

  // ---- start and stop ----------------------------------------------------------------------------------------

  async function start(event) {
    event.preventDefault();
    showError("");
    const sessionId = $("voice-session").value.trim();
    const token = $("voice-token").value;
    if (!sessionId || !token) {
      showError("Enter the Live session id and the developer token.");
      return;
    }
    $("voice-start").disabled = true;
    setState("starting", "starting");
    try {
      context = new AudioContext();
      await context.resume();
      await context.audioWorklet.addModule("/dev/static/voice-worklet.js");
      stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
      });
    } catch (err) {
      stop();
      showError(`The microphone cannot start: ${err && err.name ? err.name : err}`);
      return;
    }
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const url = `${scheme}://${location.host}/dev/v1/live/sessions/${encodeURIComponent(sessionId)}/voice`;
    try {
      ws = new WebSocket(url, [SUBPROTOCOL, BEARER_PREFIX + base64url(token)]);
    } catch (err) {
      stop();
      showError(`The socket cannot open: ${err && err.message ? err.message : err}`);
      return;
    }
    $("voice-token").value = "";
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      setState("on", "connected");
      $("voice-stop").disabled = false;
      log(`connected to ${sessionId}`);
      connectMicrophone();
    };
    ws.onmessage = onFrame;
    ws.onclose = (closed) => {
      const why = closed.reason ? `${closed.code} ${closed.reason}` : String(closed.code);
      log(`socket closed (${why})`, closed.code === 1000 ? "note" : "error");
      if (closed.code !== 1000) showError(`The voice socket closed: ${why}`);
      stop();
      setState("off", closed.code === 1000 ? "closed" : "disconnected");
    };
  }

  function connectMicrophone() {
    sourceNode = context.createMediaStreamSource(stream);
    capture = new AudioWorkletNode(context, "pcm-capture", {
      numberOfInputs: 1,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { targetRate: INPUT_RATE, frameSamples: FRAME_SAMPLES },
    });
    capture.port.onmessage = (message) => {
      if (message.data instanceof ArrayBuffer) sendAudio(message.data);
      else if (message.data && message.data.rate) $("capture-rate").textContent = `${message.data.rate} Hz`;
    };
    // The worklet's output is silent: a zero gain keeps it in the rendered graph without echoing the microphone.
    sinkNode = context.createGain();
    sinkNode.gain.value = 0;
    sourceNode.connect(capture);
    capture.connect(sinkNode);
    sinkNode.connect(context.destination);
  }

  function stop() {
    if (ws) {
      const socket = ws;
      ws = null;
      socket.onclose = null;
      socket.onmessage = null;
      if (socket.readyState === WebSocket.OPEN || socket.readyState === WebSocket.CONNECTING) socket.close(1000);
    }
    if (capture) capture.port.onmessage = null;
    for (const node of [sourceNode, capture, sinkNode]) {
      if (node) node.disconnect();
    }
    sourceNode = capture = sinkNode = null;
    if (stream) for (const track of stream.getTracks()) track.stop();
    stream = null;
    for (const source of playing) {
      source.onended = null;
      try {
        source.stop();
      } catch (err) {
        // already stopped
      }
    }
    playing.clear();
    waiting.splice(0);
    if (context) context.close();
    context = null;
    playHead = 0;
    seq = 0;
    showPlayback();
    $("voice-start").disabled = false;
    $("voice-stop").disabled = true;
  }

  function wire() {
    const params = new URLSearchParams(location.search);
    const session = params.get("session");
    if (session) $("voice-session").value = session;
    $("voice-form").addEventListener("submit", start);
    $("voice-stop").addEventListener("click", () => {
      stop();
      setState("off", "stopped");
      log("stopped");
    });
    for (const name of ["frames-sent", "frames-received", "audio-received", "acks-sent", "turns", "interruptions",
      "cancelled-sources"]) {
      counters[name] = 0;
    }
    (session ? $("voice-token") : $("voice-session")).focus();
  }

  wire();
})();
