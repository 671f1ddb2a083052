// adk_actors voice page: the microphone's AudioWorklet. Turns the capture (any context rate, first channel) into
// 20 ms frames of 16 kHz signed 16-bit little-endian PCM and posts each frame's ArrayBuffer to the page.
"use strict";

class PcmCapture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const given = (options && options.processorOptions) || {};
    this.targetRate = given.targetRate || 16000;
    this.frameSamples = given.frameSamples || 320;
    this.step = sampleRate / this.targetRate; // input samples per output sample
    // Downsampling keeps the band below the target's Nyquist frequency with a one-pole low-pass (speech is fine).
    this.alpha = this.step > 1 ? 1 - Math.exp((-2 * Math.PI * 0.45 * this.targetRate) / sampleRate) : 1;
    this.smooth = 0;
    this.previous = 0; // the previous block's last (filtered) sample: interpolation spans block boundaries
    this.position = 0; // where the next output sample falls, in input samples from the current block's start
    this.frame = new DataView(new ArrayBuffer(this.frameSamples * 2));
    this.filled = 0;
    this.filtered = new Float32Array(128);
    this.port.postMessage({ rate: sampleRate });
  }

  emit(value) {
    const clamped = Math.max(-1, Math.min(1, value));
    this.frame.setInt16(this.filled * 2, Math.round(clamped * 32767), true);
    this.filled += 1;
    if (this.filled === this.frameSamples) {
      const buffer = this.frame.buffer;
      this.port.postMessage(buffer, [buffer]);
      this.frame = new DataView(new ArrayBuffer(this.frameSamples * 2));
      this.filled = 0;
    }
  }

  process(inputs) {
    const input = inputs[0];
    if (!input || input.length === 0 || input[0].length === 0) return true;
    const channel = input[0];
    const count = channel.length;
    if (this.filtered.length < count) this.filtered = new Float32Array(count);
    const x = this.filtered;
    for (let i = 0; i < count; i += 1) {
      this.smooth += this.alpha * (channel[i] - this.smooth);
      x[i] = this.smooth;
    }
    // Linear interpolation at `position` in [-1, count - 1): index -1 is the previous block's last sample.
    let position = this.position;
    while (position < count - 1) {
      const index = Math.floor(position);
      const fraction = position - index;
      const a = index < 0 ? this.previous : x[index];
      const b = x[index + 1];
      this.emit(a + (b - a) * fraction);
      position += this.step;
    }
    this.position = position - count;
    this.previous = x[count - 1];
    return true;
  }
}

registerProcessor("pcm-capture", PcmCapture);
