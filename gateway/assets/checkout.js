// The hosted checkout page: reads the public checkout endpoint, shows what to pay and where,
// counts down to expiry and follows the status without a reload. No third-party code.
(function () {
  'use strict';
  var root = document.getElementById('checkout');
  var invoiceId = root.getAttribute('data-invoice-id');
  var endpoint = '/api/checkout/' + encodeURIComponent(invoiceId);
  var el = function (id) { return document.getElementById(id); };
  var current = null;

  function setText(id, text) { el(id).textContent = text; }

  // A price with its currency's minor units ("25.00 EUR", "1500 JPY"): ISO 4217's, as Intl knows
  // them (the same digits the API accepts for a price; dashboard/src/money.ts does the same).
  function formatFiat(amount, currency) {
    var digits = 2;
    try {
      digits = new Intl.NumberFormat('en', { style: 'currency', currency: currency }).resolvedOptions().maximumFractionDigits;
    } catch (e) { /* not an ISO code: two decimals */ }
    return amount.toFixed(digits) + ' ' + currency;
  }

  function formatRemaining(ms) {
    if (ms <= 0) return '0:00';
    var total = Math.floor(ms / 1000);
    var h = Math.floor(total / 3600), m = Math.floor((total % 3600) / 60), s = total % 60;
    var mm = (h > 0 && m < 10 ? '0' : '') + m;
    return (h > 0 ? h + ':' : '') + mm + ':' + (s < 10 ? '0' : '') + s;
  }

  function render(c) {
    current = c;
    root.className = 'card state-' + c.status.toLowerCase();
    el('sandbox').classList.toggle('hidden', !c.isSandbox);
    setText('amount', c.amountExpectedDecimal + ' ' + c.payCurrency);
    setText('fiat', formatFiat(c.priceAmount, c.priceCurrency));
    // The network, named where the amount is, and the warning: an EVM address is the same on every
    // EVM network, and a transfer on another one does not pay this invoice (docs/networks.md).
    setText('network-label', c.payNetworkLabel);
    setText('network-warning-label', c.payNetworkLabel);
    el('token-contract-line').classList.toggle('hidden', c.tokenContract === null);
    if (c.tokenContract !== null) {
      setText('token-contract-asset', c.payCurrency);
      setText('token-contract', c.tokenContract);
    }
    setText('address', c.address);
    // The URI asks for what is still missing: a new one (after a partial payment) loads a new code.
    if (el('qr').getAttribute('alt') !== 'QR code: ' + c.paymentUri) {
      el('qr').setAttribute('src', endpoint + '/qr.svg?for=' + encodeURIComponent(c.amountRemainingDecimal));
      el('qr').setAttribute('alt', 'QR code: ' + c.paymentUri);
    }
    el('wallet-link').setAttribute('href', c.paymentUri);
    // Live invoices: a partial payment leaves the pay panel open for the rest; once the price is
    // on the chain, the confirmations count up ("2 of 12").
    var partially = c.status === 'PartiallyPaid';
    var confirming = c.status === 'Confirming';
    var waiting = c.status === 'Waiting' || partially;
    el('pay').classList.toggle('hidden', !waiting);
    el('confirming').classList.toggle('hidden', !confirming);
    if (confirming) setText('confirmations', c.confirmations + ' of ' + c.confirmationsRequired);
    if (partially) setText('amount', c.amountRemainingDecimal + ' ' + c.payCurrency);
    el('paid').classList.toggle('hidden', c.status !== 'Paid');
    el('expired').classList.toggle('hidden', c.status !== 'Expired');
    el('success-link').setAttribute('href', c.successUrl);
    el('cancel-link').setAttribute('href', c.cancelUrl);
    el('back-link').setAttribute('href', c.cancelUrl);
    // The status line and the way out belong to the waiting state; the result panels say the rest.
    setText('status', partially
      ? 'Received ' + c.amountReceivedDecimal + ' ' + c.payCurrency + ' — ' + c.amountRemainingDecimal + ' ' + c.payCurrency + ' remaining'
      : 'Waiting for payment…');
    el('status').classList.toggle('hidden', !waiting);
    el('back-link').parentNode.classList.toggle('hidden', !waiting);
    setText('received', c.amountReceivedDecimal + ' ' + c.payCurrency);
    tick();
  }

  function tick() {
    if (!current) return;
    var remaining = new Date(current.expiredAt).getTime() - Date.now();
    setText('countdown', formatRemaining(remaining));
  }

  function poll() {
    fetch(endpoint, { headers: { accept: 'application/json' }, cache: 'no-store' })
      .then(function (res) { return res.ok ? res.json() : null; })
      .then(function (c) {
        if (c) render(c);
        if (!c || c.status === 'Waiting' || c.status === 'PartiallyPaid' || c.status === 'Confirming') setTimeout(poll, 1500);
      })
      .catch(function () { setTimeout(poll, 3000); });
  }

  el('copy').addEventListener('click', function () {
    var text = el('address').textContent;
    var done = function () { setText('copy', 'Copied'); setTimeout(function () { setText('copy', 'Copy'); }, 1500); };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, done);
    else { var r = document.createRange(); r.selectNodeContents(el('address')); var s = window.getSelection(); s.removeAllRanges(); s.addRange(r); done(); }
  });

  setInterval(tick, 1000);
  poll();
})();
