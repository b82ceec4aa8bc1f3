// Renders /openapi.json as a readable reference, with no third-party code.
(function () {
  'use strict';
  function h(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    (children || []).forEach(function (c) { node.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return node;
  }
  function schemaBlock(title, schema) {
    return h('details', {}, [h('summary', {}, [title]), h('pre', {}, [JSON.stringify(schema, null, 2)])]);
  }
  function operation(method, path, op) {
    var parts = [h('div', {}, [h('span', { class: 'method ' + method }, [method]), h('code', {}, [path]), ' ', h('span', { class: 'muted' }, [op.summary || ''])])];
    if (op.security) parts.push(h('div', { class: 'muted' }, ['Auth: ' + op.security.map(function (s) { return Object.keys(s)[0]; }).join(' or ')]));
    (op.parameters || []).forEach(function (p) {
      parts.push(h('div', {}, [h('code', {}, [p.name]), ' (' + p.in + (p.required ? ', required' : '') + ') ', h('span', { class: 'muted' }, [p.description || ''])]));
    });
    if (op.requestBody) parts.push(schemaBlock('Request body', op.requestBody.content['application/json'].schema));
    Object.keys(op.responses || {}).forEach(function (status) {
      var r = op.responses[status];
      var content = r.content && (r.content['application/json'] || r.content['application/problem+json']);
      parts.push(content ? schemaBlock(status + ' — ' + r.description, content.schema) : h('div', {}, [status + ' — ' + r.description]));
    });
    return h('section', { class: 'op', id: (op.operationId || '') }, parts);
  }
  fetch('/openapi.json').then(function (r) { return r.json(); }).then(function (doc) {
    document.getElementById('description').textContent = doc.info.description;
    var main = document.getElementById('reference');
    main.textContent = '';
    var byTag = {};
    Object.keys(doc.paths).forEach(function (path) {
      Object.keys(doc.paths[path]).forEach(function (method) {
        var op = doc.paths[path][method];
        var tag = (op.tags && op.tags[0]) || 'other';
        (byTag[tag] = byTag[tag] || []).push(operation(method, path, op));
      });
    });
    (doc.tags || []).map(function (t) { return t.name; }).concat(Object.keys(byTag)).filter(function (t, i, all) { return byTag[t] && all.indexOf(t) === i; }).forEach(function (tag) {
      main.appendChild(h('h2', {}, [tag]));
      byTag[tag].forEach(function (n) { main.appendChild(n); });
    });
    main.appendChild(h('h2', {}, ['webhooks']));
    Object.keys(doc.webhooks || {}).forEach(function (name) {
      main.appendChild(operation('post', name, doc.webhooks[name].post));
    });
  });
})();
