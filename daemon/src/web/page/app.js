// tau web client. Served by taud; no other host, no build step. Every text from the hub or the
// model is set with textContent, never as markup. The device's private key is a non-extractable
// WebCrypto key kept in IndexedDB; the session cookie is HttpOnly, so this script never sees it.
'use strict';

const ARMING_MS = 500;
const state = { texts: {}, session: null, source: null, streamKey: null, cards: new Map(), reply: null };

function t(key, args) {
  let text = state.texts[key] || key;
  for (const [name, value] of Object.entries(args || {})) text = text.split('{' + name + '}').join(String(value));
  return text.replace(/\{\{/g, '{').replace(/\}\}/g, '}');
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function hex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, '0')).join('');
}

async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: {} };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  const response = await fetch(path, init);
  let json = {};
  try { json = await response.json(); } catch (e) { json = {}; }
  if (!response.ok) { const error = new Error(json.error || response.statusText); error.status = response.status; throw error; }
  return json;
}

// The device identity: {device_id, keys} in IndexedDB (a CryptoKeyPair clones as is).
function db() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open('tau-web', 1);
    request.onupgradeneeded = () => request.result.createObjectStore('identity');
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}
async function loadIdentity() {
  const store = (await db()).transaction('identity').objectStore('identity');
  return new Promise((resolve) => { const r = store.get('device'); r.onsuccess = () => resolve(r.result || null); r.onerror = () => resolve(null); });
}
async function saveIdentity(identity) {
  const tx = (await db()).transaction('identity', 'readwrite');
  tx.objectStore('identity').put(identity, 'device');
  return new Promise((resolve, reject) => { tx.oncomplete = resolve; tx.onerror = () => reject(tx.error); });
}

async function enroll(code) {
  const keys = await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify']);
  const publicKey = hex(await crypto.subtle.exportKey('raw', keys.publicKey));
  const answer = await api('POST', '/api/enroll', { code, public_key: publicKey });
  const identity = { device_id: answer.device_id, keys };
  await saveIdentity(identity);
  return identity;
}

async function signIn(identity) {
  const { challenge } = await api('POST', '/api/challenge', { device_id: identity.device_id });
  const message = new TextEncoder().encode('tau-web-login\n' + location.origin + '\n' + challenge);
  const signature = await crypto.subtle.sign({ name: 'ECDSA', hash: 'SHA-256' }, identity.keys.privateKey, message);
  await api('POST', '/api/login', { device_id: identity.device_id, challenge, signature: hex(signature) });
}

function notice(text) {
  document.getElementById('notice').textContent = text;
}

async function start() {
  let boot = await api('GET', '/api/boot');
  state.texts = boot.texts;
  document.documentElement.lang = boot.lang;
  const fragment = new URLSearchParams(location.hash.slice(1));
  let identity = null;
  if (fragment.has('pair')) {
    // The code leaves the address bar (and history) before anything else happens.
    history.replaceState(null, '', location.pathname);
    notice(t('web.pairing'));
    try { identity = await enroll(fragment.get('pair')); } catch (e) { notice(t('web.pair_failed', { reason: e.message })); return; }
  } else {
    identity = await loadIdentity();
  }
  if (!boot.device) {
    if (!identity) { notice(t('web.not_enrolled')); return; }
    try { await signIn(identity); } catch (e) { notice(e.status === 403 ? t('web.not_enrolled') : e.message); return; }
    boot = await api('GET', '/api/boot');
  }
  state.identity = identity;
  layout(boot.device);
  await Promise.all([refreshSessions(), refreshPending(), refreshStatus(), refreshRoutines(), refreshNodes()]);
  setInterval(() => { refreshStatus().catch(() => {}); refreshRoutines().catch(() => {}); refreshNodes().catch(() => {}); }, 30000);
  const sessions = document.querySelectorAll('#sessions li[data-session]');
  await openSession(sessions.length ? 'most_recent' : 'new');
}

function layout(device) {
  const app = document.getElementById('app');
  app.replaceChildren(
    el('header', {}, el('strong', {}, 'tau'), el('span', { id: 'device' }, t('web.signed_in_as', { name: device })), el('span', { id: 'state' }, t('tui.state.idle'))),
    el('nav', { id: 'side' },
      el('h2', {}, t('tui.sessions')),
      el('button', { id: 'new-session', type: 'button' }, t('web.new_session')),
      el('ul', { id: 'sessions' }),
      el('h2', {}, t('web.pending')),
      el('ul', { id: 'pending' }),
      el('h2', {}, t('web.routines')),
      el('ul', { id: 'routines' }),
      el('h2', {}, t('web.nodes')),
      el('ul', { id: 'nodes' }),
      el('h2', {}, t('web.status')),
      el('pre', { id: 'status' })),
    el('main', { id: 'chat' },
      el('h2', { id: 'title' }, t('tui.conversation')),
      el('ol', { id: 'log', 'aria-live': 'polite' }),
      el('form', { id: 'composer' },
        el('textarea', { id: 'input', rows: '2', placeholder: t('web.placeholder') }),
        el('button', { type: 'submit', id: 'send' }, t('web.send')),
        el('button', { type: 'button', id: 'stop' }, t('web.cancel')))),
    el('p', { id: 'notice', role: 'status' }));
  document.getElementById('new-session').addEventListener('click', () => openSession('new'));
  document.getElementById('composer').addEventListener('submit', (event) => { event.preventDefault(); send(); });
  document.getElementById('input').addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey) { event.preventDefault(); send(); }
  });
  document.getElementById('stop').addEventListener('click', () => state.session && api('POST', '/api/cancel', { session_id: state.session }).catch(() => {}));
}

async function refreshSessions() {
  const { sessions } = await api('GET', '/api/sessions');
  const list = document.getElementById('sessions');
  list.replaceChildren(...sessions.map((s) => {
    const button = el('button', { type: 'button', class: 'session' }, s.title || s.session_id);
    button.addEventListener('click', () => openSession(s.session_id));
    return el('li', { 'data-session': s.session_id, class: s.session_id === state.session ? 'current' : '' }, button);
  }));
  if (!sessions.length) list.append(el('li', { class: 'empty' }, t('web.no_sessions')));
}

async function refreshPending() {
  const { approvals } = await api('GET', '/api/pending');
  const list = document.getElementById('pending');
  list.replaceChildren(...approvals.map((a) => {
    const button = el('button', { type: 'button' }, a.tool + ' · ' + a.session_id);
    button.addEventListener('click', () => openSession(a.session_id));
    return el('li', {}, button);
  }));
  if (!approvals.length) list.append(el('li', { class: 'empty' }, t('web.none_pending')));
}

async function refreshStatus() {
  const status = await api('GET', '/api/status');
  document.getElementById('status').textContent =
    'v' + status.version + ' · ' + status.backend + ' · ' + status.default_role + '\n' +
    t('tui.sessions') + ': ' + status.sessions_open + ' · ' + t('web.pending') + ': ' + status.approvals_pending + '\n' +
    (status.tools || []).join(', ');
}

function when(text) {
  const date = new Date(text);
  return isNaN(date) ? text : date.toLocaleString(document.documentElement.lang);
}

// Each routine: its name and schedule, then its last firing (outcome and time) or its next one.
async function refreshRoutines() {
  const answer = await api('GET', '/api/routines');
  const list = document.getElementById('routines');
  list.replaceChildren(...answer.routines.map((r) => {
    const last = r.last_firings[0];
    const firing = last
      ? el('span', { class: 'firing', 'data-outcome': last.outcome }, t('web.last_firing', { outcome: t('web.outcome.' + last.outcome), time: when(last.started_at) }))
      : el('span', { class: 'firing' }, t('web.never_fired'));
    const next = r.paused ? t('web.paused') : r.next_firing ? t('web.next_firing', { time: when(r.next_firing) }) : '';
    return el('li', { 'data-routine': r.name, class: 'routine' },
      el('strong', {}, r.name), ' ', el('span', { class: 'schedule' }, r.schedule), el('br'), firing, next ? el('br') : '', next);
  }));
  if (!answer.enabled) list.append(el('li', { class: 'empty' }, t('web.routines_off', { reason: answer.problem })));
  else if (!answer.routines.length) list.append(el('li', { class: 'empty' }, t('web.no_routines')));
}

async function refreshNodes() {
  const { nodes } = await api('GET', '/api/nodes');
  const list = document.getElementById('nodes');
  list.replaceChildren(...nodes.map((n) => el('li', { 'data-node': n.name, class: n.live ? 'node live' : 'node away' },
    el('strong', {}, n.name), ' · ' + t(n.live ? 'web.node_live' : 'web.node_away') + (n.tools.length ? ' · ' + n.tools.join(', ') : ''))));
  if (!nodes.length) list.append(el('li', { class: 'empty' }, t('web.no_nodes')));
}

function line(role, text) {
  const item = el('li', { class: 'line ' + role }, text);
  document.getElementById('log').append(item);
  item.scrollIntoView({ block: 'end' });
  return item;
}

async function openSession(target) {
  const opened = await api('POST', '/api/open', { target });
  const id = opened.session.session_id;
  state.session = id;
  state.cards.clear();
  state.reply = null;
  const { messages } = await api('GET', '/api/messages?session=' + encodeURIComponent(id));
  document.getElementById('title').textContent = opened.session.title || id;
  document.getElementById('log').replaceChildren();
  for (const m of messages) line(m.role, m.role === 'tool' ? '⚙ ' + m.tool : m.text);
  if (state.source) state.source.close();
  const source = new EventSource('/api/events?session=' + encodeURIComponent(id));
  state.source = source;
  source.addEventListener('snapshot', (e) => onSnapshot(JSON.parse(e.data)));
  source.addEventListener('session', (e) => onEvent(JSON.parse(e.data)));
  source.addEventListener('revoked', () => { source.close(); document.getElementById('app').replaceChildren(el('p', { id: 'notice', role: 'status' }, t('web.revoked'))); });
  source.addEventListener('lagged', () => { source.close(); openSession(id); });
  // The session cookie ran out (or was signed out): sign in again with this device's key, reopen.
  source.addEventListener('expired', () => {
    source.close();
    signIn(state.identity).then(() => openSession(id), (e) => notice(e.status === 403 ? t('web.not_enrolled') : e.message));
  });
  source.addEventListener('error', () => { if (source.readyState === EventSource.CLOSED && state.source === source) notice(t('web.reconnecting')); });
  refreshSessions().catch(() => {});
}

function onSnapshot(snapshot) {
  state.streamKey = snapshot.stream_key;
  for (const card of state.cards.values()) if (card.open) card.node.remove();
  state.cards.clear();
  for (const pending of snapshot.pending) showCard(pending);
  setState(snapshot.pending.length ? 'tui.state.awaiting_approval' : snapshot.running ? 'tui.state.running' : 'tui.state.idle');
}

function setState(key) {
  const node = document.getElementById('state');
  if (node) node.textContent = t(key);
}

function onEvent(event) {
  switch (event.type) {
    case 'turn_started': line('user', event.text); state.reply = null; setState('tui.state.running'); break;
    case 'text_delta':
      if (!state.reply) state.reply = line('assistant', '');
      state.reply.textContent += event.text;
      break;
    case 'tool_use_started': line('tool', '⚙ ' + event.tool + '…'); state.reply = null; break;
    case 'tool_call': line('tool', '⚙ ' + event.tool + ': ' + event.status + ' (' + event.approval + ')'); break;
    case 'approval_requested': showCard(event.approval); setState('tui.state.awaiting_approval'); refreshPending().catch(() => {}); break;
    case 'approval_resolved': resolveCard(event); refreshPending().catch(() => {}); break;
    case 'turn_ended':
      if (event.notice) line('notice', event.notice);
      state.reply = null; setState('tui.state.idle');
      refreshSessions().catch(() => {}); refreshStatus().catch(() => {}); refreshRoutines().catch(() => {});
      break;
    case 'error': line('notice', event.message); break;
    default: break;
  }
}

async function send() {
  const input = document.getElementById('input');
  const text = input.value.trim();
  if (!text || !state.session) return;
  input.value = '';
  const key = hex(crypto.getRandomValues(new Uint8Array(12)));
  try { await api('POST', '/api/turn', { session_id: state.session, text, key }); } catch (e) { line('notice', e.message); }
}

// The approval card: sorted, escaped arguments as the hub formats them, the effect and the tier;
// focus on Reject; for ARMING_MS nothing (key or click) counts or moves focus; then Enter rejects (the focused
// button), `y` approves, `n` or Escape rejects.
function showCard(approval) {
  if (state.cards.has(approval.approval_id)) return;
  const approve = el('button', { type: 'button', class: 'approve', 'aria-disabled': 'true' }, t('approval.button_approve') + ' ' + t('approval.arming'));
  const reject = el('button', { type: 'button', class: 'reject' }, t('approval.button_reject'));
  const verdict = el('p', { class: 'verdict', role: 'status' });
  const node = el('section', { class: 'card', role: 'alertdialog', 'data-approval': approval.approval_id },
    el('h3', {}, t('approval.title', { tier: approval.tier })),
    el('p', {}, t('approval.tool') + ' ', el('code', {}, approval.tool), ' · ' + t('tier.label', { tier: approval.tier }) + ' (' + t('tier.' + approval.tier) + ')'),
    el('p', {}, t('approval.arguments')),
    el('pre', { class: 'arguments' }, approval.arguments),
    el('p', {}, t('approval.effect') + ' ', el('span', { class: 'effect' }, approval.effect)),
    el('div', { class: 'buttons' }, reject, approve),
    verdict);
  const card = { approval, node, open: true, armedAt: performance.now() + ARMING_MS, mine: null, approve, reject, verdict };
  state.cards.set(approval.approval_id, card);
  document.getElementById('log').append(node);
  node.scrollIntoView({ block: 'end' });
  reject.focus();
  const armed = () => performance.now() >= card.armedAt;
  setTimeout(() => {
    if (!card.open) return;
    approve.textContent = t('approval.button_approve');
    approve.setAttribute('aria-disabled', 'false');
    node.classList.add('armed');
  }, ARMING_MS);
  // Before arming a press neither counts nor moves focus off Reject (else Enter would approve).
  node.addEventListener('mousedown', (e) => { if (!armed()) e.preventDefault(); }, true);
  approve.addEventListener('click', (e) => { e.preventDefault(); if (armed()) decide(card, 'approved'); else reject.focus(); });
  reject.addEventListener('click', (e) => { e.preventDefault(); if (armed()) decide(card, 'rejected'); else reject.focus(); });
  node.addEventListener('keydown', (e) => {
    if (!armed()) { e.preventDefault(); e.stopPropagation(); return; }
    if (e.key === 'y' || e.key === 'Y') { e.preventDefault(); decide(card, 'approved'); }
    else if (e.key === 'n' || e.key === 'N' || e.key === 'Escape') { e.preventDefault(); decide(card, 'rejected'); }
  }, true);
}

async function decide(card, decision) {
  if (!card.open || card.mine) return;
  card.mine = decision;
  card.approve.disabled = true; card.reject.disabled = true;
  try {
    const answer = await api('POST', '/api/decide', { approval_id: card.approval.approval_id, decision, stream_key: state.streamKey });
    if (answer.result !== 'applied') card.mine = null;
    if (answer.resolution) settle(card, answer.resolution, answer.result === 'applied');
  } catch (e) {
    card.mine = null; card.approve.disabled = false; card.reject.disabled = false;
    card.verdict.textContent = e.message;
  }
}

function resolveCard(event) {
  const card = state.cards.get(event.approval_id);
  if (card) settle(card, event.resolution, card.mine !== null);
}

function settle(card, resolution, mine) {
  if (!card.open) return;
  card.open = false;
  card.node.classList.add('decided');
  card.approve.remove(); card.reject.remove();
  const tool = card.approval.tool;
  let text;
  if (!mine && (resolution === 'approved' || resolution === 'rejected')) text = t('approval.decided_elsewhere', { tool }) + ' (' + resolution + ')';
  else if (resolution === 'approved') text = t('approval.approved', { tool });
  else if (resolution === 'rejected' || resolution === 'channel_closed') text = t('approval.rejected', { tool });
  else if (resolution === 'timeout') text = t('approval.timed_out', { tool });
  else if (resolution === 'expired_by_restart') text = t('approval.expired_by_restart', { tool });
  else text = t('approval.expired', { tool });
  card.verdict.textContent = text;
  card.node.setAttribute('data-resolution', resolution);
  card.node.setAttribute('data-decided', mine ? 'here' : 'elsewhere');
}

document.addEventListener('DOMContentLoaded', () => { start().catch((e) => notice(e.message)); });
