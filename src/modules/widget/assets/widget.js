/*
 * Parley chat widget: the customer side of /v1/chat, for an owner's web site.
 *
 *   <script src="https://parley.example.com/widget.js" data-key="pk_…" async></script>
 *
 * Plain JavaScript, no dependency, one file (its CSS is below). Everything renders inside a Shadow DOM, so the
 * page's CSS does not reach it and its CSS does not leak out; all text from the conversation is set with
 * textContent, never as HTML. It talks only to the API base taken from its own src (or data-api). The page drives it
 * through window.Parley (open, close, identify, events…); calls made before this script loaded wait in a queue
 * (window.Parley.q, filled by the stub in docs/widget.md) and run when it mounts. See docs/widget.md.
 */
(function () {
  'use strict';

  var script = document.currentScript || document.querySelector('script[data-key][src*="widget.js"]');
  if (!script || window.__parleyWidget) return;
  window.__parleyWidget = true;

  var data = script.dataset;
  var KEY = (data.key || '').trim();
  if (!/^pk_/.test(KEY)) {
    // A server key in a web page would hand the whole account to every visitor: refuse it rather than use it.
    console.error('Parley widget: data-key must be a public key (pk_…); ' + (KEY ? 'refusing to use a non-public key in a web page' : 'none given'));
    return;
  }
  var API = (data.api || new URL('v1', script.src).href).replace(/\/+$/, '');
  /** data-launcher="false": no launcher button; the page opens the panel from its own button through window.Parley. */
  var LAUNCHER = data.launcher !== 'false';
  var STORE_KEY = 'parley.widget.' + KEY;
  /** Attempts of one request when the network fails (the first included), and the wait before each retry. */
  var ATTEMPTS = 4;
  var BACKOFF_MS = [500, 1500, 3500];
  /** A request with no answer after this long is treated as a network failure (and retried with its key). */
  var TIMEOUT_MS = 30000;
  /**
   * The longest Retry-After waited out by a retry. A proxy's 503 may ask for an hour (maintenance): waiting that
   * long with the typing indicator and the send button disabled would look like a hang, so it is answered at once.
   */
  var MAX_RETRY_WAIT_S = 10;

  // ---- labels: every string the widget shows or gives to a screen reader, per language -------------------------
  /*
   * {name} is filled in (as text). A value may also be {one, other, …}: the form for the count {n}, by
   * Intl.PluralRules. Durations are whole numbers with their unit ({n} s, {n} min, {n} h), put into tooMany as {wait}.
   * The conversation's own text (the greeting, the answers) comes from the service and is not translated here.
   */
  var LABELS = {
    en: {
      title: 'Chat with us',
      openChat: 'Open chat: {title}',
      openChatUnread: 'Open chat: {title} ({n} unread)',
      closeChat: 'Close chat: {title}',
      close: 'Close chat',
      escalate: 'Talk to a person',
      end: 'End chat',
      conversation: 'Conversation',
      typing: 'The assistant is typing',
      you: 'You:',
      speaker: '{name}:',
      assistant: 'Assistant',
      message: 'Your message',
      placeholder: 'Type your message…',
      send: 'Send',
      contact: 'Contact details',
      contactAsk: 'A person from our team will follow up. Where can they reach you?',
      email: 'Email (required)',
      name: 'Name (optional)',
      sendDetails: 'Send details',
      contactDone: 'Thanks! A person from our team will reach you at {email}.',
      change: 'Change',
      escalated: "We've asked a person from our team to take over this conversation.",
      ended: 'This chat has ended.',
      newChat: 'Start a new chat',
      invalidEmail: 'Please enter a valid email address.',
      tooMany: 'Too many messages. Please try again in {wait}.',
      seconds: '{n} s',
      minutes: '{n} min',
      hours: '{n} h',
      unreachable: 'Could not reach the chat service. Check your connection and try again.',
      startFailed: 'Sorry, starting the chat did not work. Please try again.',
      sendFailed: 'Sorry, sending your message did not work. Please try again.',
      escalateFailed: 'Sorry, reaching a person did not work. Please try again.',
      contactFailed: 'Sorry, sending your details did not work. Please try again.',
      endFailed: 'Sorry, ending the chat did not work. Please try again.',
    },
    de: {
      title: 'Chatten Sie mit uns',
      openChat: 'Chat öffnen: {title}',
      openChatUnread: 'Chat öffnen: {title} ({n} ungelesen)',
      closeChat: 'Chat schließen: {title}',
      close: 'Chat schließen',
      escalate: 'Mit einer Person sprechen',
      end: 'Chat beenden',
      conversation: 'Unterhaltung',
      typing: 'Der Assistent schreibt',
      you: 'Sie:',
      speaker: '{name}:',
      assistant: 'Assistent',
      message: 'Ihre Nachricht',
      placeholder: 'Nachricht eingeben…',
      send: 'Senden',
      contact: 'Kontaktdaten',
      contactAsk: 'Eine Person aus unserem Team meldet sich bei Ihnen. Wie können wir Sie erreichen?',
      email: 'E-Mail (erforderlich)',
      name: 'Name (optional)',
      sendDetails: 'Angaben senden',
      contactDone: 'Danke! Eine Person aus unserem Team meldet sich unter {email}.',
      change: 'Ändern',
      escalated: 'Wir haben eine Person aus unserem Team gebeten, diese Unterhaltung zu übernehmen.',
      ended: 'Dieser Chat wurde beendet.',
      newChat: 'Neuen Chat starten',
      invalidEmail: 'Bitte geben Sie eine gültige E-Mail-Adresse ein.',
      tooMany: 'Zu viele Nachrichten. Bitte versuchen Sie es in {wait} erneut.',
      seconds: '{n} Sek.',
      minutes: '{n} Min.',
      hours: '{n} Std.',
      unreachable: 'Der Chat-Dienst ist nicht erreichbar. Bitte prüfen Sie Ihre Verbindung und versuchen Sie es erneut.',
      startFailed: 'Der Chat konnte leider nicht gestartet werden. Bitte versuchen Sie es erneut.',
      sendFailed: 'Ihre Nachricht konnte leider nicht gesendet werden. Bitte versuchen Sie es erneut.',
      escalateFailed: 'Die Weiterleitung an eine Person hat leider nicht funktioniert. Bitte versuchen Sie es erneut.',
      contactFailed: 'Ihre Angaben konnten leider nicht gesendet werden. Bitte versuchen Sie es erneut.',
      endFailed: 'Der Chat konnte leider nicht beendet werden. Bitte versuchen Sie es erneut.',
    },
    // French typography: a no-break space (U+00A0) before ":", "?" and "!" and between a number and its unit.
    fr: {
      title: 'Discutez avec nous',
      openChat: 'Ouvrir le chat\u00a0: {title}',
      openChatUnread: { one: 'Ouvrir le chat\u00a0: {title} ({n}\u00a0non lu)', other: 'Ouvrir le chat\u00a0: {title} ({n}\u00a0non lus)' },
      closeChat: 'Fermer le chat\u00a0: {title}',
      close: 'Fermer le chat',
      escalate: 'Parler à une personne',
      end: 'Terminer le chat',
      conversation: 'Conversation',
      typing: 'L’assistant est en train d’écrire',
      you: 'Vous\u00a0:',
      speaker: '{name}\u00a0:',
      assistant: 'Assistant',
      message: 'Votre message',
      placeholder: 'Écrivez votre message…',
      send: 'Envoyer',
      contact: 'Coordonnées',
      contactAsk: 'Une personne de notre équipe va vous recontacter. Où pouvons-nous vous joindre\u00a0?',
      email: 'E-mail (obligatoire)',
      name: 'Nom (facultatif)',
      sendDetails: 'Envoyer mes coordonnées',
      contactDone: 'Merci\u00a0! Une personne de notre équipe vous contactera à l’adresse {email}.',
      change: 'Modifier',
      escalated: 'Nous avons demandé à une personne de notre équipe de reprendre cette conversation.',
      ended: 'Ce chat est terminé.',
      newChat: 'Démarrer un nouveau chat',
      invalidEmail: 'Veuillez saisir une adresse e-mail valide.',
      tooMany: 'Trop de messages. Veuillez réessayer dans {wait}.',
      seconds: '{n}\u00a0s',
      minutes: '{n}\u00a0min',
      hours: '{n}\u00a0h',
      unreachable: 'Impossible de joindre le service de chat. Vérifiez votre connexion et réessayez.',
      startFailed: 'Désolé, le chat n’a pas pu démarrer. Veuillez réessayer.',
      sendFailed: 'Désolé, votre message n’a pas pu être envoyé. Veuillez réessayer.',
      escalateFailed: 'Désolé, nous n’avons pas pu joindre une personne. Veuillez réessayer.',
      contactFailed: 'Désolé, vos coordonnées n’ont pas pu être envoyées. Veuillez réessayer.',
      endFailed: 'Désolé, le chat n’a pas pu être terminé. Veuillez réessayer.',
    },
    es: {
      title: 'Chatea con nosotros',
      openChat: 'Abrir chat: {title}',
      openChatUnread: 'Abrir chat: {title} ({n} sin leer)',
      closeChat: 'Cerrar chat: {title}',
      close: 'Cerrar chat',
      escalate: 'Hablar con una persona',
      end: 'Terminar chat',
      conversation: 'Conversación',
      typing: 'El asistente está escribiendo',
      you: 'Tú:',
      speaker: '{name}:',
      assistant: 'Asistente',
      message: 'Tu mensaje',
      placeholder: 'Escribe tu mensaje…',
      send: 'Enviar',
      contact: 'Datos de contacto',
      contactAsk: 'Una persona de nuestro equipo se pondrá en contacto contigo. ¿Dónde podemos localizarte?',
      email: 'Correo electrónico (obligatorio)',
      name: 'Nombre (opcional)',
      sendDetails: 'Enviar datos',
      contactDone: '¡Gracias! Una persona de nuestro equipo te escribirá a {email}.',
      change: 'Cambiar',
      escalated: 'Hemos pedido a una persona de nuestro equipo que continúe esta conversación.',
      ended: 'Este chat ha terminado.',
      newChat: 'Iniciar un chat nuevo',
      invalidEmail: 'Introduce una dirección de correo electrónico válida.',
      tooMany: 'Demasiados mensajes. Inténtalo de nuevo en {wait}.',
      seconds: '{n} s',
      minutes: '{n} min',
      hours: '{n} h',
      unreachable: 'No se pudo conectar con el servicio de chat. Comprueba tu conexión e inténtalo de nuevo.',
      startFailed: 'Lo sentimos, no se pudo iniciar el chat. Inténtalo de nuevo.',
      sendFailed: 'Lo sentimos, no se pudo enviar tu mensaje. Inténtalo de nuevo.',
      escalateFailed: 'Lo sentimos, no se pudo contactar con una persona. Inténtalo de nuevo.',
      contactFailed: 'Lo sentimos, no se pudieron enviar tus datos. Inténtalo de nuevo.',
      endFailed: 'Lo sentimos, no se pudo terminar el chat. Inténtalo de nuevo.',
    },
    nl: {
      title: 'Chat met ons',
      openChat: 'Chat openen: {title}',
      openChatUnread: 'Chat openen: {title} ({n} ongelezen)',
      closeChat: 'Chat sluiten: {title}',
      close: 'Chat sluiten',
      escalate: 'Met een medewerker praten',
      end: 'Chat beëindigen',
      conversation: 'Gesprek',
      typing: 'De assistent typt',
      you: 'Jij:',
      speaker: '{name}:',
      assistant: 'Assistent',
      message: 'Je bericht',
      placeholder: 'Typ je bericht…',
      send: 'Versturen',
      contact: 'Contactgegevens',
      contactAsk: 'Iemand van ons team neemt contact met je op. Waar kunnen we je bereiken?',
      email: 'E-mail (verplicht)',
      name: 'Naam (optioneel)',
      sendDetails: 'Gegevens versturen',
      contactDone: 'Bedankt! Iemand van ons team neemt contact met je op via {email}.',
      change: 'Wijzigen',
      escalated: 'We hebben iemand van ons team gevraagd dit gesprek over te nemen.',
      ended: 'Deze chat is beëindigd.',
      newChat: 'Nieuwe chat starten',
      invalidEmail: 'Vul een geldig e-mailadres in.',
      tooMany: 'Te veel berichten. Probeer het over {wait} opnieuw.',
      seconds: '{n} s',
      minutes: '{n} min',
      hours: '{n} uur',
      unreachable: 'De chatdienst is niet bereikbaar. Controleer je verbinding en probeer het opnieuw.',
      startFailed: 'Sorry, de chat kon niet worden gestart. Probeer het opnieuw.',
      sendFailed: 'Sorry, je bericht kon niet worden verstuurd. Probeer het opnieuw.',
      escalateFailed: 'Sorry, we konden geen medewerker bereiken. Probeer het opnieuw.',
      contactFailed: 'Sorry, je gegevens konden niet worden verstuurd. Probeer het opnieuw.',
      endFailed: 'Sorry, de chat kon niet worden beëindigd. Probeer het opnieuw.',
    },
    // Worded for both Portugal and Brazil (no "você"/"tu", no equipa/equipe, contacto/contato).
    pt: {
      title: 'Precisa de ajuda?',
      openChat: 'Abrir chat: {title}',
      openChatUnread: { one: 'Abrir chat: {title} ({n} não lida)', other: 'Abrir chat: {title} ({n} não lidas)' },
      closeChat: 'Fechar chat: {title}',
      close: 'Fechar chat',
      escalate: 'Falar com uma pessoa',
      end: 'Encerrar chat',
      conversation: 'Conversa',
      typing: 'O assistente escreve uma resposta',
      you: 'Eu:',
      speaker: '{name}:',
      assistant: 'Assistente',
      message: 'Mensagem',
      placeholder: 'Escreva a sua mensagem…',
      send: 'Enviar',
      contact: 'Os seus dados',
      contactAsk: 'Uma pessoa vai dar seguimento a este pedido. Qual é o seu e-mail?',
      email: 'E-mail (obrigatório)',
      name: 'Nome (opcional)',
      sendDetails: 'Enviar dados',
      contactDone: 'Obrigado! Uma pessoa vai responder para {email}.',
      change: 'Alterar',
      escalated: 'Pedimos a uma pessoa que assuma esta conversa.',
      ended: 'Este chat terminou.',
      newChat: 'Iniciar novo chat',
      invalidEmail: 'Indique um endereço de e-mail válido.',
      tooMany: 'Mensagens em excesso. Tente novamente em {wait}.',
      seconds: '{n} s',
      minutes: '{n} min',
      hours: '{n} h',
      unreachable: 'O serviço de chat não está acessível. Verifique a rede e tente novamente.',
      startFailed: 'Não foi possível iniciar o chat. Tente novamente.',
      sendFailed: 'Não foi possível enviar a mensagem. Tente novamente.',
      escalateFailed: 'Não foi possível chamar uma pessoa. Tente novamente.',
      contactFailed: 'Não foi possível enviar os dados. Tente novamente.',
      endFailed: 'Não foi possível encerrar o chat. Tente novamente.',
    },
    it: {
      title: 'Chatta con noi',
      openChat: 'Apri la chat: {title}',
      openChatUnread: { one: 'Apri la chat: {title} ({n} non letto)', other: 'Apri la chat: {title} ({n} non letti)' },
      closeChat: 'Chiudi la chat: {title}',
      close: 'Chiudi la chat',
      escalate: 'Parla con una persona',
      end: 'Termina la chat',
      conversation: 'Conversazione',
      typing: 'L’assistente sta scrivendo',
      you: 'Tu:',
      speaker: '{name}:',
      assistant: 'Assistente',
      message: 'Il tuo messaggio',
      placeholder: 'Scrivi un messaggio…',
      send: 'Invia',
      contact: 'Dati di contatto',
      contactAsk: 'Una persona del nostro team ti ricontatterà. Dove possiamo raggiungerti?',
      email: 'Email (obbligatoria)',
      name: 'Nome (facoltativo)',
      sendDetails: 'Invia i dati',
      contactDone: 'Grazie! Una persona del nostro team ti scriverà a {email}.',
      change: 'Modifica',
      escalated: 'Abbiamo chiesto a una persona del nostro team di seguire questa conversazione.',
      ended: 'Questa chat è terminata.',
      newChat: 'Inizia una nuova chat',
      invalidEmail: 'Inserisci un indirizzo email valido.',
      tooMany: 'Troppi messaggi. Riprova tra {wait}.',
      seconds: '{n} s',
      minutes: '{n} min',
      hours: '{n} h',
      unreachable: 'Impossibile raggiungere il servizio di chat. Controlla la connessione e riprova.',
      startFailed: 'Non è stato possibile avviare la chat. Riprova.',
      sendFailed: 'Non è stato possibile inviare il messaggio. Riprova.',
      escalateFailed: 'Non è stato possibile contattare una persona. Riprova.',
      contactFailed: 'Non è stato possibile inviare i tuoi dati. Riprova.',
      endFailed: 'Non è stato possibile terminare la chat. Riprova.',
    },
  };
  /** A language tag as the labels are looked up by: lower case, `_` read as `-`. */
  function tagOf(given) {
    return String(given || '').trim().toLowerCase().replace(/_/g, '-');
  }
  /** The built-in set for a tag: its own, else its language's (pt-br → pt), else English. */
  function setFor(tag) {
    return Object.prototype.hasOwnProperty.call(LABELS, tag) ? tag : Object.prototype.hasOwnProperty.call(LABELS, tag.split('-')[0]) ? tag.split('-')[0] : 'en';
  }
  /** The language asked for: data-lang, else the page's <html lang> (read at load), else setLanguage()'s. */
  var ASKED = tagOf(data.lang || document.documentElement.getAttribute('lang'));
  /** The built-in set used. */
  var LANG = setFor(ASKED);
  /**
   * The page's own wordings of single labels (data-labels, setLabels), checked: only known names, each a string
   * (or an object of plural forms with at least `other`). Anything else is said in the console and left out.
   */
  function checkLabels(given, from) {
    var out = {};
    if (!given || typeof given !== 'object' || Array.isArray(given)) {
      console.warn('Parley widget: ' + from + ' must be an object of labels, e.g. {"send": "Go"}');
      return out;
    }
    Object.keys(given).forEach(function (k) {
      var v = given[k];
      if (!Object.prototype.hasOwnProperty.call(LABELS.en, k)) console.warn('Parley widget: ' + from + ': no label "' + k + '"');
      else if (typeof v === 'string' || (v && typeof v === 'object' && typeof v.other === 'string')) out[k] = v;
      else console.warn('Parley widget: ' + from + ': label "' + k + '" must be a string');
    });
    return out;
  }
  /** The page's wordings over the built-in set: data-labels, then data-title, then each setLabels() call. */
  var overrides = {};
  if (data.labels) {
    try {
      overrides = checkLabels(JSON.parse(data.labels), 'data-labels');
    } catch {
      console.warn('Parley widget: data-labels is not JSON; ignored');
    }
  }
  if (data.title) overrides.title = data.title;
  /**
   * one, few, many, other… for n: by the page's own tag first (plural forms given in data-labels for a language
   * without a built-in set), else by the set's language; 'other' without Intl.
   */
  function pluralForm(n) {
    var tries = ASKED ? [[ASKED, LANG], [LANG]] : [[LANG]];
    for (var i = 0; i < tries.length; i++) {
      try {
        return new window.Intl.PluralRules(tries[i]).select(n);
      } catch {
        /* a tag Intl refuses: the next try */
      }
    }
    return 'other';
  }
  /** A label with its {names} filled in ({title} in any label); a label of plural forms takes the form for vars.n. */
  function t(key, vars) {
    var v = Object.prototype.hasOwnProperty.call(overrides, key) ? overrides[key] : Object.prototype.hasOwnProperty.call(LABELS[LANG], key) ? LABELS[LANG][key] : LABELS.en[key];
    if (v && typeof v === 'object') {
      var form = pluralForm(vars && typeof vars.n === 'number' ? vars.n : 0);
      v = typeof v[form] === 'string' ? v[form] : v.other;
    }
    return String(v).replace(/\{(\w+)\}/g, function (whole, name) {
      if (vars && vars[name] !== undefined && vars[name] !== null) return String(vars[name]);
      return name === 'title' && key !== 'title' ? t('title') : whole;
    });
  }

  var CSS = [
    ':host{all:initial !important;display:block !important;position:static !important;visibility:visible !important;opacity:1 !important}',
    '*{box-sizing:border-box;font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}',
    '[hidden]{display:none !important}',
    '.root{--accent:#2563eb;--fg:#111827;--muted:#6b7280;--bg:#fff;--soft:#f3f4f6;font-size:15px;line-height:1.4;color:var(--fg)}',
    '.launcher{position:fixed;right:20px;bottom:20px;z-index:2147483000;width:56px;height:56px;border-radius:50%;border:0;cursor:pointer;',
    'background:var(--accent);color:#fff;box-shadow:0 4px 14px rgba(0,0,0,.25);display:flex;align-items:center;justify-content:center;padding:0}',
    '.launcher svg{width:28px;height:28px;fill:currentColor}',
    '.badge{position:absolute;top:-4px;right:-4px;min-width:20px;height:20px;padding:0 6px;border-radius:10px;background:#dc2626;color:#fff;',
    'font-size:12px;font-weight:700;line-height:20px;text-align:center;box-shadow:0 0 0 2px #fff}',
    '.launcher .shut{display:none}.root.open .launcher .chat{display:none}.root.open .launcher .shut{display:block}',
    '.launcher:focus-visible,button:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}',
    'textarea:focus,input:focus{outline:2px solid var(--accent);outline-offset:-1px;border-color:transparent}',
    '.panel{position:fixed;right:20px;bottom:88px;z-index:2147483000;width:370px;max-width:calc(100vw - 40px);height:560px;max-height:calc(100vh - 110px);',
    'background:var(--bg);border-radius:14px;box-shadow:0 10px 40px rgba(0,0,0,.25);display:flex;flex-direction:column;overflow:hidden}',
    'header{background:var(--accent);color:#fff;padding:12px 12px 10px 16px;display:flex;align-items:center;gap:8px;flex:none}',
    'h2{font-size:16px;font-weight:600;margin:0;flex:1;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}',
    '.close{background:transparent;border:0;color:#fff;font-size:24px;line-height:1;width:36px;height:36px;border-radius:8px;cursor:pointer;padding:0}',
    '.close:hover{background:rgba(255,255,255,.15)}',
    '.actions{display:flex;gap:8px;padding:8px 12px;border-bottom:1px solid #e5e7eb;flex:none;flex-wrap:wrap}',
    '.actions button,.newchat{font-size:13px;background:var(--soft);border:1px solid #e5e7eb;color:var(--fg);border-radius:999px;padding:5px 12px;cursor:pointer}',
    '.actions button:hover{background:#e5e7eb}',
    '.log{flex:1;overflow-y:auto;padding:14px 12px;display:flex;flex-direction:column;gap:8px;background:var(--bg)}',
    '.msg{max-width:85%;padding:8px 12px;border-radius:14px;white-space:pre-wrap;overflow-wrap:anywhere;word-break:break-word}',
    '.msg.assistant{align-self:flex-start;background:var(--soft);border-bottom-left-radius:4px}',
    '.msg.customer{align-self:flex-end;background:var(--accent);color:#fff;border-bottom-right-radius:4px}',
    '.msg.customer.pending{opacity:.7}',
    '.note{align-self:center;text-align:center;color:var(--muted);font-size:13px;max-width:90%}',
    '.typing{align-self:flex-start;background:var(--soft);border-radius:14px;padding:10px 14px;display:flex;gap:4px}',
    '.typing span{width:7px;height:7px;border-radius:50%;background:#9ca3af;animation:blink 1.2s infinite}',
    '.typing span:nth-child(2){animation-delay:.2s}.typing span:nth-child(3){animation-delay:.4s}',
    '@keyframes blink{0%,80%,100%{opacity:.3}40%{opacity:1}}',
    '@media (prefers-reduced-motion:reduce){.typing span{animation:none}}',
    '.contact{margin:0 12px 8px;padding:10px 12px;border:1px solid #e5e7eb;border-radius:10px;background:#fafafa;display:flex;flex-direction:column;gap:6px;flex:none}',
    '.contact p{margin:0;font-size:13px}',
    '.contact label{font-size:12px;color:var(--muted)}',
    '.contact input{font-size:15px;padding:7px 9px;border:1px solid #d1d5db;border-radius:8px;width:100%;background:#fff;color:var(--fg)}',
    '.contact button{align-self:flex-end;background:var(--accent);color:#fff;border:0;border-radius:8px;padding:7px 14px;cursor:pointer;font-size:14px}',
    '.contact-done{margin:0 12px 8px;font-size:13px;color:#065f46;background:#ecfdf5;border-radius:10px;padding:8px 12px;flex:none}',
    '.contact-done button{background:none;border:0;color:inherit;text-decoration:underline;cursor:pointer;padding:0 0 0 4px;font-size:13px}',
    '.error{margin:0 12px 8px;font-size:13px;color:#991b1b;background:#fef2f2;border-radius:10px;padding:8px 12px;flex:none}',
    '.newchat{align-self:center;margin-top:4px}',
    '.compose{display:flex;gap:8px;align-items:flex-end;padding:10px 12px;border-top:1px solid #e5e7eb;flex:none;background:var(--bg)}',
    '.compose textarea{flex:1;resize:none;font-size:15px;line-height:1.4;padding:8px 10px;border:1px solid #d1d5db;border-radius:10px;max-height:120px;min-height:40px;',
    'color:var(--fg);background:#fff}',
    '.send{background:var(--accent);color:#fff;border:0;border-radius:10px;height:40px;padding:0 14px;cursor:pointer;font-size:14px;font-weight:600}',
    '.send:disabled{opacity:.5;cursor:default}',
    '.sr{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);white-space:nowrap;border:0}',
    // No launcher (data-launcher="false"): the panel sits in the corner the launcher would have taken.
    '.root.bare .panel{bottom:20px;max-height:calc(100vh - 40px)}',
    // A phone: the panel takes the whole screen, its header's close button is the way back.
    '@media (max-width:480px){.panel,.root.bare .panel{right:0;bottom:0;width:100%;max-width:100%;height:100%;max-height:100%;border-radius:0}',
    '.root.open .launcher{display:none}.compose textarea{font-size:16px}}',
  ].join('\n');

  // ---- state kept across page loads: the conversation of this key on this site --------------------------------
  var memory = {};
  function readStore() {
    try {
      return JSON.parse(window.localStorage.getItem(STORE_KEY) || '{}') || {};
    } catch {
      return memory;
    }
  }
  function writeStore(patch) {
    var s = readStore();
    for (var k in patch) {
      if (patch[k] === null) delete s[k];
      else s[k] = patch[k];
    }
    memory = s;
    try {
      window.localStorage.setItem(STORE_KEY, JSON.stringify(s));
    } catch {
      /* storage refused (private mode, quota): kept for this page only */
    }
  }

  // ---- DOM ------------------------------------------------------------------------------------------------------
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var a in attrs || {}) {
      if (a === 'text') e.textContent = attrs[a];
      else if (a === 'hidden') e.hidden = attrs[a];
      else e.setAttribute(a, attrs[a]);
    }
    (children || []).forEach(function (c) {
      e.appendChild(c);
    });
    return e;
  }
  function icon(d, cls) {
    var ns = 'http://www.w3.org/2000/svg';
    var svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('class', cls);
    svg.setAttribute('viewBox', '0 0 24 24');
    svg.setAttribute('aria-hidden', 'true');
    svg.setAttribute('focusable', 'false');
    var path = document.createElementNS(ns, 'path');
    path.setAttribute('d', d);
    svg.appendChild(path);
    return svg;
  }

  var host = document.createElement('parley-widget');
  var shadow = host.attachShadow({ mode: 'open' });
  // A constructed stylesheet is not an inline <style>, so a page whose CSP has no 'unsafe-inline' still styles it.
  try {
    var sheet = new CSSStyleSheet();
    sheet.replaceSync(CSS);
    shadow.adoptedStyleSheets = [sheet];
  } catch {
    shadow.appendChild(el('style', { text: CSS }));
  }

  /** Elements showing a label, as text or in an attribute: [element, 'text' or the attribute, label name]. */
  var bound = [];
  function bind(e, where, key) {
    bound.push([e, where, key]);
    return e;
  }

  /** The count of assistant messages that came while the panel was closed; the launcher's name says it too. */
  var badge = el('span', { class: 'badge', 'aria-hidden': 'true', hidden: true });
  var launcher = el('button', { type: 'button', class: 'launcher', 'aria-expanded': 'false', 'aria-controls': 'parley-panel' }, [
    icon('M4 4h16a2 2 0 0 1 2 2v10a2 2 0 0 1-2 2H8l-4 4V6a2 2 0 0 1 2-2z', 'chat'),
    icon('M7.4 8.6 12 13.2l4.6-4.6L18 10l-6 6-6-6z', 'shut'),
    badge,
  ]);
  var closeBtn = bind(el('button', { type: 'button', class: 'close', text: '\u00d7' }), 'aria-label', 'close');
  var escalateBtn = bind(el('button', { type: 'button', class: 'escalate' }), 'text', 'escalate');
  var endBtn = bind(el('button', { type: 'button', class: 'end' }), 'text', 'end');
  var log = bind(el('div', { class: 'log', role: 'log' }), 'aria-label', 'conversation');
  var live = el('div', { class: 'sr', 'aria-live': 'polite', 'aria-atomic': 'true' });
  var typing = bind(el('div', { class: 'typing', hidden: true, role: 'status' }, [el('span'), el('span'), el('span')]), 'aria-label', 'typing');
  var errorBox = el('div', { class: 'error', role: 'alert', hidden: true });
  var contactEmail = el('input', { type: 'email', id: 'parley-contact-email', name: 'email', required: '', autocomplete: 'email', maxlength: '320' });
  var contactName = el('input', { type: 'text', id: 'parley-contact-name', name: 'name', autocomplete: 'name', maxlength: '200' });
  var contactForm = bind(el('form', { class: 'contact', hidden: true, novalidate: '' }, [
    bind(el('p'), 'text', 'contactAsk'),
    bind(el('label', { for: 'parley-contact-email' }), 'text', 'email'),
    contactEmail,
    bind(el('label', { for: 'parley-contact-name' }), 'text', 'name'),
    contactName,
    bind(el('button', { type: 'submit' }), 'text', 'sendDetails'),
  ]), 'aria-label', 'contact');
  var contactDoneText = el('span');
  var contactChange = bind(el('button', { type: 'button' }), 'text', 'change');
  var contactDone = el('div', { class: 'contact-done', role: 'status', hidden: true }, [contactDoneText, contactChange]);
  var input = bind(el('textarea', { id: 'parley-input', rows: '1', maxlength: '4000', autocomplete: 'off' }), 'placeholder', 'placeholder');
  var sendBtn = bind(el('button', { type: 'submit', class: 'send' }), 'text', 'send');
  var compose = el('form', { class: 'compose' }, [bind(el('label', { for: 'parley-input', class: 'sr' }), 'text', 'message'), input, sendBtn]);
  var panel = bind(el('section', { class: 'panel', id: 'parley-panel', role: 'dialog', hidden: true }, [
    el('header', {}, [bind(el('h2'), 'text', 'title'), closeBtn]),
    el('div', { class: 'actions' }, [escalateBtn, endBtn]),
    log,
    errorBox,
    contactForm,
    contactDone,
    compose,
  ]), 'aria-label', 'title');
  launcher.hidden = !LAUNCHER;
  // lang: a screen reader reads the labels in their language (the conversation's text is the service's).
  // The live region is outside the panel: a reply that comes after the customer closed it is still announced.
  // The page's writing direction: a right-to-left page (dir="rtl" on <html>) gets a right-to-left panel, whose own
  // labels (data-labels, setLabels) are then in its language.
  var root = el('div', { class: LAUNCHER ? 'root' : 'root bare', lang: LANG, dir: document.documentElement.getAttribute('dir') === 'rtl' ? 'rtl' : 'ltr' }, [launcher, panel, live]);
  if (data.color) root.style.setProperty('--accent', data.color);
  shadow.appendChild(root);

  // ---- the conversation as the widget knows it -------------------------------------------------------------------
  var state = {
    conversation: null, // the API's conversation, once started or restored
    loading: null, // the promise of the start or restore under way
    busy: false, // a send under way
    /**
     * The text of the last send that failed, the conversation it went to and its key: sending the same text to the
     * same conversation again reuses the key. A key stands for one request (path included) on the service, so
     * reused for another conversation it would be refused as "already used".
     */
    pending: null,
    contactEditing: false,
    /** Where focus goes back to when the panel closes: the launcher, or what had focus before the page opened it. */
    returnFocus: null,
    /** Assistant messages that arrived while the panel was closed (kept in storage: the next page shows them too). */
    unread: 0,
  };

  // ---- events for the page (window.Parley.on) ---------------------------------------------------------------------
  var EVENTS = ['ready', 'open', 'close', 'message', 'escalated', 'ended', 'unread'];
  var handlers = {};
  var isReady = false;
  /** Calls the page's handlers of `name`; one that throws is reported in the console and the others still run. */
  function emit(name, detail) {
    (handlers[name] || []).slice().forEach(function (fn) {
      try {
        fn(detail);
      } catch (e) {
        console.error('Parley widget: a "' + name + '" handler threw', e);
      }
    });
  }

  function uuid() {
    if (window.crypto && typeof window.crypto.randomUUID === 'function') return window.crypto.randomUUID();
    var b = new Uint8Array(16);
    window.crypto.getRandomValues(b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    var h = Array.prototype.map.call(b, function (x) {
      return (x + 0x100).toString(16).slice(1);
    }).join('');
    return h.slice(0, 8) + '-' + h.slice(8, 12) + '-' + h.slice(12, 16) + '-' + h.slice(16, 20) + '-' + h.slice(20);
  }
  function sleep(ms) {
    return new Promise(function (r) {
      setTimeout(r, ms);
    });
  }

  /**
   * One call to the chat API. Every POST carries an Idempotency-Key (`idemKey`, or a new one): when the network
   * fails (or no answer comes within TIMEOUT_MS) it is sent again with the same key, a few times with a growing
   * wait, so a message the service did receive is answered again from its record instead of being posted twice.
   * Answers `{ok, status, data, error, retryAfter}`; `status` 0 when the network never answered.
   */
  function call(method, path, body, idemKey) {
    var headers = { Authorization: 'Bearer ' + KEY };
    if (method === 'POST') headers['Idempotency-Key'] = idemKey || uuid();
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    var attempt = 0;
    function once() {
      var ctrl = typeof AbortController === 'function' ? new AbortController() : null;
      var timer = ctrl && setTimeout(function () {
        ctrl.abort();
      }, TIMEOUT_MS);
      return window
        .fetch(API + path, {
          method: method,
          headers: headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          credentials: 'omit',
          mode: 'cors',
          signal: ctrl ? ctrl.signal : undefined,
        })
        .then(
          function (res) {
            return res.text().then(function (text) {
              var json = null;
              try {
                json = text ? JSON.parse(text) : null;
              } catch {
                json = null;
              }
              var retryAfter = parseInt(res.headers.get('Retry-After') || '', 10);
              var out = {
                ok: res.ok && !!json && json.success === true,
                status: res.status,
                data: json && json.data,
                error: (json && json.error) || null,
                retryAfter: isNaN(retryAfter) ? null : retryAfter,
                // Why an Idempotency-Key refused the request (in-progress, key-reused, answer-lost); the message's
                // wording is the fallback for a service from before the header.
                idempotency: res.headers.get('Idempotency-Status'),
              };
              // The first request with this key is still running on the service (it got the message): wait, then ask again.
              var inProgress = res.status === 429 && (out.idempotency === 'in-progress' || (out.error && /still being processed/.test(out.error.message || '')));
              var wait = out.retryAfter || 1;
              // A 500 with Retry-After is the service saying its database is out of reach for a moment (unreachable,
              // locked, full): the message was not taken (the key was released), so it is sent again. A 500 without
              // it is a fault that sending again would only repeat.
              var passing = res.status === 500 && out.retryAfter !== null;
              if ((inProgress || passing || res.status === 502 || res.status === 503 || res.status === 504) && method === 'POST' && attempt < ATTEMPTS - 1 && wait <= MAX_RETRY_WAIT_S) {
                return retry(wait * 1000);
              }
              return out;
            });
          },
          function () {
            if (attempt < ATTEMPTS - 1) return retry(BACKOFF_MS[attempt]);
            return { ok: false, status: 0, data: null, error: null, retryAfter: null };
          },
        )
        .finally(function () {
          if (timer) clearTimeout(timer);
        });
    }
    function retry(ms) {
      attempt += 1;
      return sleep(ms).then(once);
    }
    return once();
  }

  // ---- rendering -------------------------------------------------------------------------------------------------
  function scrollDown() {
    log.scrollTop = log.scrollHeight;
  }
  /** Said by a screen reader before a message: "You:" or "<persona>:". */
  function whoOf(role) {
    return (role === 'customer' ? t('you') : t('speaker', { name: (state.conversation && state.conversation.persona) || t('assistant') })) + ' ';
  }
  function addMessage(m, pending) {
    var role = m.role === 'customer' ? 'customer' : m.role === 'assistant' ? 'assistant' : 'note';
    var node = el('div', { class: role === 'note' ? 'note' : 'msg ' + role + (pending ? ' pending' : '') });
    if (m.id) node.setAttribute('data-id', m.id);
    if (role !== 'note') node.appendChild(el('span', { class: 'sr who', 'data-role': role, text: whoOf(role) }));
    node.appendChild(el('span', { class: 'text', text: m.content }));
    log.insertBefore(node, typing.parentNode === log ? typing : null);
    if (role === 'assistant') live.textContent = m.content;
    scrollDown();
    return node;
  }
  function addNote(text) {
    var node = el('div', { class: 'note', role: 'status', text: text });
    log.insertBefore(node, typing.parentNode === log ? typing : null);
    scrollDown();
    return node;
  }
  function showError(text) {
    errorBox.textContent = text || '';
    errorBox.hidden = !text;
  }
  /** What to say of a failed request; `failed` names the action's own message (startFailed, sendFailed…). */
  function problem(r, failed) {
    if (r.status === 429) {
      // Retry-After is seconds: up to a day when the account's daily limit is used up.
      var s = r.retryAfter || 60;
      var wait = s < 120 ? t('seconds', { n: s }) : s < 7200 ? t('minutes', { n: Math.ceil(s / 60) }) : t('hours', { n: Math.ceil(s / 3600) });
      return t('tooMany', { wait: wait });
    }
    if (r.status === 0) return t('unreachable');
    return t(failed);
  }

  function ended() {
    return !!(state.conversation && state.conversation.endedAt);
  }
  function escalated() {
    return !!(state.conversation && (state.conversation.status === 'escalated' || state.conversation.escalatedAt));
  }
  /** Shows what the conversation allows: the actions, the contact form or its confirmation, the input. */
  function refresh() {
    var c = state.conversation;
    var open = !!c && !ended();
    escalateBtn.hidden = !open || escalated();
    endBtn.hidden = !open;
    compose.hidden = !!c && ended();
    sendBtn.disabled = state.busy || !!state.loading;
    var wantsContact = !!c && escalated();
    var known = c && c.customerEmail;
    contactForm.hidden = !wantsContact || (!!known && !state.contactEditing);
    contactDone.hidden = !wantsContact || !known || state.contactEditing;
    if (known) contactDoneText.textContent = t('contactDone', { email: c.customerEmail });
    // The form or a notice taking its place shrinks the transcript: keep its last message in view.
    scrollDown();
  }

  /**
   * The conversation as the service now answers it (after a read, an escalation, contact details, the end). When it
   * has become escalated meanwhile — by the button or by the assistant — the page hears of it once.
   */
  function setConversation(c) {
    var before = state.conversation;
    var was = escalated();
    state.conversation = c;
    if (before && c && before.id === c.id && !was && escalated()) emit('escalated', { conversationId: c.id, reason: c.escalationReason || null });
  }
  /** An assistant message that came in now (a greeting or a reply; not one read back with a transcript). */
  function arrived(m) {
    if (!m || m.role !== 'assistant') return;
    emit('message', { id: m.id, content: m.content, conversationId: state.conversation && state.conversation.id });
    if (!isOpen()) setUnread(state.unread + 1);
  }
  function setUnread(n) {
    if (n === state.unread) return;
    state.unread = n;
    writeStore({ unread: n || null });
    showUnread();
    emit('unread', { count: n });
  }
  function showUnread() {
    badge.textContent = state.unread > 9 ? '9+' : String(state.unread);
    badge.hidden = !state.unread;
    updateLauncher();
  }

  /** The launcher's name says what it does: open or close the chat. */
  function updateLauncher() {
    var name = isOpen() ? 'closeChat' : state.unread ? 'openChatUnread' : 'openChat';
    launcher.setAttribute('aria-label', t(name, { n: state.unread }));
  }
  /** Puts the labels in use on every element showing one (at start, and after setLabels). */
  function applyLabels() {
    bound.forEach(function (b) {
      var text = t(b[2]);
      if (b[1] === 'text') b[0].textContent = text;
      else b[0].setAttribute(b[1], text);
    });
    Array.prototype.forEach.call(log.querySelectorAll('.who'), function (w) {
      w.textContent = whoOf(w.getAttribute('data-role'));
    });
    updateLauncher();
    refresh();
  }

  function render(conversation, messages) {
    state.conversation = conversation;
    log.textContent = '';
    (messages || conversation.messages || []).forEach(function (m) {
      addMessage(m);
    });
    live.textContent = '';
    refresh();
  }

  // ---- actions ---------------------------------------------------------------------------------------------------
  /** The customer attributes of the next start: the data-customer-* attributes, until the page calls identify(). */
  var identity = { id: data.customerId, label: data.customerLabel, email: data.customerEmail };
  function startBody() {
    var b = {};
    if (identity.id) b.customerId = identity.id;
    if (identity.label) b.customerLabel = identity.label;
    if (identity.email) b.customerEmail = identity.email;
    return b;
  }

  /**
   * Starts a conversation. A customer attribute the service refuses (an email it does not take, a label too long) is
   * the page's mistake, not the customer's: said in the console and left out, so the customer can still chat.
   */
  function start(body) {
    return call('POST', '/chat/conversations', body).then(function (r) {
      var bad = !r.ok && r.status === 400 && r.error && /^body\.(customerId|customerLabel|customerEmail)\b/.exec(r.error.message || '');
      if (!bad || !Object.prototype.hasOwnProperty.call(body, bad[1])) return r;
      console.warn('Parley widget: the service refused ' + bad[1] + ' (' + r.error.message + '); the chat starts without it');
      var rest = {};
      Object.keys(body).forEach(function (k) {
        if (k !== bad[1]) rest[k] = body[k];
      });
      return start(rest);
    });
  }

  /** The stored conversation, read again; a new one when there is none, or it ended, or the service lost it. */
  function ensureConversation() {
    if (state.conversation && !ended()) return Promise.resolve(true);
    if (state.loading) return state.loading;
    showError('');
    var id = readStore().conversationId;
    var restore = id && !state.conversation
      ? call('GET', '/chat/conversations/' + encodeURIComponent(id)).then(function (r) {
          if (r.ok && !r.data.conversation.endedAt) {
            render(r.data.conversation);
            return true;
          }
          // 400: an id the service cannot read (storage edited by hand, or left by another version) would be
          // refused on every open: forget it like one that is gone.
          if (r.ok || r.status === 400 || r.status === 404 || r.status === 401 || r.status === 403) {
            writeStore({ conversationId: null });
            return false;
          }
          throw r;
        })
      : Promise.resolve(false);
    state.loading = restore
      .then(function (restored) {
        if (restored) return true;
        return start(startBody()).then(function (r) {
          if (!r.ok) throw r;
          writeStore({ conversationId: r.data.conversation.id });
          state.contactEditing = false;
          render(r.data.conversation, r.data.messages);
          (r.data.messages || []).forEach(arrived);
          return true;
        });
      })
      .catch(function (r) {
        showError(problem(r, 'startFailed'));
        return false;
      })
      .then(function (ok) {
        state.loading = null;
        refresh();
        return ok;
      });
    refresh();
    return state.loading;
  }

  /** Reads the conversation's state again (escalated? contact address?) without redrawing the transcript. */
  function reread() {
    var c = state.conversation;
    return call('GET', '/chat/conversations/' + encodeURIComponent(c.id)).then(function (r) {
      if (r.ok && state.conversation && state.conversation.id === c.id) {
        setConversation(r.data.conversation);
        refresh();
      }
      return r;
    });
  }

  function conversationEnded() {
    // Forget it only if it is still the stored one: another tab of the site may have started a new one meanwhile.
    if (state.conversation && readStore().conversationId === state.conversation.id) writeStore({ conversationId: null });
    if (state.conversation) state.conversation.endedAt = state.conversation.endedAt || new Date().toISOString();
    addNote(t('ended'));
    if (state.conversation) emit('ended', { conversationId: state.conversation.id });
    var again = el('button', { type: 'button', class: 'newchat', text: t('newChat') });
    again.addEventListener('click', function () {
      state.conversation = null;
      log.textContent = '';
      ensureConversation().then(function (ok) {
        if (ok) input.focus();
      });
    });
    log.appendChild(again);
    refresh();
    scrollDown();
  }

  function send(text) {
    if (state.busy || !text.trim()) return;
    state.busy = true;
    showError('');
    input.value = '';
    var mine = addMessage({ role: 'customer', content: text }, true);
    log.appendChild(typing);
    typing.hidden = false;
    scrollDown();
    refresh();
    ensureConversation()
      .then(function (ok) {
        if (!ok) return { ok: false, status: -1 };
        // A conversation started (or restored) just now redrew the transcript: the message goes after it.
        if (!mine.isConnected) log.appendChild(mine);
        log.appendChild(typing);
        scrollDown();
        var c = state.conversation;
        var p = state.pending;
        var key = p && p.text === text && p.conversationId === c.id ? p.key : uuid();
        state.pending = { text: text, key: key, conversationId: c.id };
        return call('POST', '/chat/conversations/' + encodeURIComponent(c.id) + '/messages', { content: text }, key);
      })
      .then(function (r) {
        typing.hidden = true;
        if (typing.parentNode) typing.parentNode.removeChild(typing);
        state.busy = false;
        if (r.ok) {
          state.pending = null;
          var msgs = r.data.messages;
          mine.classList.remove('pending');
          if (msgs[0] && msgs[0].id) mine.setAttribute('data-id', msgs[0].id);
          for (var i = 1; i < msgs.length; i++) {
            addMessage(msgs[i]);
            arrived(msgs[i]);
          }
          // The answer's status says whether the message escalated the conversation (a request for a person, or
          // questions the assistant could not answer): only then is it read again, for the escalation's details. Once
          // escalated, a reply that cites nothing may follow an email address the customer wrote (the contact
          // address), which only the conversation tells. A server without the status (older) is read as before.
          var last = msgs[msgs.length - 1];
          var c2 = state.conversation;
          var citesNothing = last && (!last.sources || last.sources.length === 0);
          var status = r.data.status;
          var newlyEscalated = status === undefined ? !escalated() : status === 'escalated' && !escalated();
          if (citesNothing && (newlyEscalated || (escalated() && !c2.customerEmail))) reread();
          refresh();
          return;
        }
        if (mine.parentNode) mine.parentNode.removeChild(mine);
        if (!input.value) input.value = text;
        var err = r.error || {};
        if (r.status === 400 && /has ended/.test(err.message || '')) {
          state.pending = null;
          conversationEnded();
          return;
        }
        if (r.status === 400 && (r.idempotency === 'answer-lost' || /was carried out/.test(err.message || ''))) {
          // The service took the message but its answer was lost: show the transcript as it is.
          state.pending = null;
          input.value = '';
          var shown = {};
          Array.prototype.forEach.call(log.querySelectorAll('[data-id]'), function (n) {
            shown[n.getAttribute('data-id')] = true;
          });
          return reread().then(function (g) {
            if (!g.ok) return;
            render(g.data.conversation);
            // The reply the lost answer carried is new to the page too.
            (g.data.conversation.messages || []).forEach(function (m) {
              if (!shown[m.id]) arrived(m);
            });
          });
        }
        if (r.status !== -1) showError(problem(r, 'sendFailed'));
        refresh();
      });
  }

  function escalate() {
    var c = state.conversation;
    if (!c) return;
    escalateBtn.disabled = true;
    call('POST', '/chat/conversations/' + encodeURIComponent(c.id) + '/escalate', {}).then(function (r) {
      escalateBtn.disabled = false;
      if (!r.ok) return showError(problem(r, 'escalateFailed'));
      showError('');
      addNote(t('escalated'));
      setConversation(r.data.conversation);
      refresh();
      if (!contactForm.hidden) contactEmail.focus();
    });
  }

  function leaveContact() {
    var c = state.conversation;
    var email = contactEmail.value.trim();
    var name = contactName.value.trim();
    if (!email || (contactEmail.checkValidity && !contactEmail.checkValidity())) {
      showError(t('invalidEmail'));
      contactEmail.focus();
      return;
    }
    var body = { email: email };
    if (name) body.name = name;
    var button = contactForm.querySelector('button');
    button.disabled = true;
    call('POST', '/chat/conversations/' + encodeURIComponent(c.id) + '/contact', body).then(function (r) {
      button.disabled = false;
      if (!r.ok) {
        var bad = r.status === 400 && r.error && /body\.email/.test(r.error.message || '');
        return showError(bad ? t('invalidEmail') : problem(r, 'contactFailed'));
      }
      showError('');
      state.contactEditing = false;
      setConversation(r.data.conversation);
      refresh();
    });
  }

  /**
   * Ends the conversation (End chat, or the page's Parley.endChat()): the one shown or, when the panel has not been
   * opened on this page, the stored one, so a page can end a chat without opening it (a customer signing out).
   * Answers whether a conversation was ended.
   */
  function endChat() {
    var c = state.conversation;
    var id = c ? (ended() ? null : c.id) : readStore().conversationId;
    if (!id) return Promise.resolve(false);
    endBtn.disabled = true;
    return call('POST', '/chat/conversations/' + encodeURIComponent(id) + '/end').then(function (r) {
      endBtn.disabled = false;
      // 404 (and 400 for a stored id the service cannot read, as on restore): there is nothing left to end.
      if (!r.ok && r.status !== 404 && !(r.status === 400 && !c)) {
        showError(problem(r, 'endFailed'));
        return false;
      }
      showError('');
      if (!c) {
        if (readStore().conversationId === id) writeStore({ conversationId: null });
        emit('ended', { conversationId: id });
      } else if (state.conversation === c) {
        if (r.ok) setConversation(r.data.conversation);
        conversationEnded();
      }
      return true;
    });
  }

  // ---- opening and closing -------------------------------------------------------------------------------------
  function isOpen() {
    return !panel.hidden;
  }
  function open(byLauncher) {
    if (isOpen()) return;
    // Opened by the page (its own button, through Parley.open()): focus goes back there on close.
    var active = document.activeElement;
    state.returnFocus = byLauncher === true ? launcher : active && active !== document.body && active !== host ? active : LAUNCHER ? launcher : null;
    panel.hidden = false;
    root.classList.add('open');
    launcher.setAttribute('aria-expanded', 'true');
    updateLauncher();
    writeStore({ open: true });
    input.focus();
    scrollDown();
    setUnread(0);
    ensureConversation();
    emit('open');
  }
  function close() {
    if (!isOpen()) return;
    // Focus is moved only out of the widget: a page closing the panel from its own code keeps its focus where it is.
    var hadFocus = document.activeElement === host;
    var back = state.returnFocus && state.returnFocus.isConnected ? state.returnFocus : LAUNCHER ? launcher : null;
    state.returnFocus = null;
    panel.hidden = true;
    root.classList.remove('open');
    launcher.setAttribute('aria-expanded', 'false');
    updateLauncher();
    writeStore({ open: null });
    if (hadFocus && back) back.focus();
    emit('close');
  }

  launcher.addEventListener('click', function () {
    if (isOpen()) close();
    else open(true);
  });
  closeBtn.addEventListener('click', close);
  escalateBtn.addEventListener('click', escalate);
  endBtn.addEventListener('click', endChat);
  contactChange.addEventListener('click', function () {
    state.contactEditing = true;
    contactEmail.value = (state.conversation && state.conversation.customerEmail) || '';
    refresh();
    contactEmail.focus();
  });
  contactForm.addEventListener('submit', function (e) {
    e.preventDefault();
    leaveContact();
  });
  compose.addEventListener('submit', function (e) {
    e.preventDefault();
    send(input.value);
  });
  input.addEventListener('keydown', function (e) {
    // Enter sends; Shift+Enter is a new line; an IME composing a word keeps its Enter.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send(input.value);
    }
  });
  input.addEventListener('input', function () {
    input.style.height = 'auto';
    input.style.height = Math.min(input.scrollHeight, 120) + 'px';
  });
  shadow.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && isOpen()) {
      e.preventDefault();
      close();
    }
  });

  // ---- the page's JavaScript API: window.Parley (docs/widget.md) --------------------------------------------------
  function warn(text) {
    console.warn('Parley widget: ' + text);
  }
  function on(name, fn) {
    if (EVENTS.indexOf(name) < 0) {
      warn('no event "' + name + '" (there are ' + EVENTS.join(', ') + ')');
      return function () {};
    }
    if (typeof fn !== 'function') {
      warn('on("' + name + '") needs a function');
      return function () {};
    }
    (handlers[name] = handlers[name] || []).push(fn);
    if (name === 'ready' && isReady) {
      // Added after the widget was ready: told all the same, once the caller's code has run (as for the others).
      Promise.resolve().then(function () {
        if ((handlers.ready || []).indexOf(fn) < 0) return;
        try {
          fn();
        } catch (e) {
          console.error('Parley widget: a "ready" handler threw', e);
        }
      });
    }
    return function () {
      off(name, fn);
    };
  }
  /** Removes one handler; without `fn`, all of the event's. */
  function off(name, fn) {
    var list = handlers[name] || [];
    if (fn === undefined) list.length = 0;
    else if (list.indexOf(fn) >= 0) list.splice(list.indexOf(fn), 1);
  }
  /**
   * The customer attributes for the next conversation started (not the running one): `{id, label, email}`, each a
   * string (an id may be a number); null or {} for none. Replaces the data-customer-* attributes. Not verified.
   */
  function identify(attrs) {
    if (attrs === null || attrs === undefined) {
      identity = {};
      return;
    }
    if (typeof attrs !== 'object') return warn('identify() takes an object {id, label, email}');
    var next = {};
    Object.keys(attrs).forEach(function (k) {
      var v = attrs[k];
      if (k !== 'id' && k !== 'label' && k !== 'email') return warn('identify(): unknown attribute "' + k + '" (there are id, label, email)');
      if (v === null || v === undefined) return;
      if (typeof v === 'number' && isFinite(v)) v = String(v);
      if (typeof v !== 'string') return warn('identify(): ' + k + ' must be a string');
      if (v.trim()) next[k] = v.trim();
    });
    identity = next;
  }
  /** Set by open/close/toggle called before the widget mounted (queued): data-open and the remembered state give way. */
  var pageChose = false;
  var methods = {
    open: function () {
      pageChose = true;
      open();
    },
    close: function () {
      pageChose = true;
      close();
    },
    toggle: function () {
      pageChose = true;
      if (isOpen()) close();
      else open();
    },
    isOpen: isOpen,
    unreadCount: function () {
      return state.unread;
    },
    /** Waits for a start or restore under way, so the conversation it brings is the one ended. */
    endChat: function () {
      return (state.loading || Promise.resolve()).then(function () {
        return endChat();
      });
    },
    identify: identify,
    /** Rewords single labels from now on ({name: text}); what the transcript already shows keeps its wording. */
    setLabels: function (given) {
      var checked = checkLabels(given, 'setLabels()');
      for (var k in checked) overrides[k] = checked[k];
      applyLabels();
    },
    /**
     * Shows the labels in another language from now on (a page that switches language without reloading), as
     * data-lang would have; the page's own labels (data-labels, setLabels) still win. What the transcript already
     * shows keeps its wording.
     */
    setLanguage: function (tag) {
      if (typeof tag !== 'string' || !tagOf(tag)) return warn('setLanguage() takes a language tag such as "de" or "pt-BR"');
      ASKED = tagOf(tag);
      LANG = setFor(ASKED);
      root.setAttribute('lang', LANG);
      applyLabels();
    },
    on: on,
    off: off,
  };
  /** window.Parley: `Parley('open')` (the stub's form, queued before the script loads) or `Parley.open()`. */
  function Parley(method) {
    if (!Object.prototype.hasOwnProperty.call(methods, method)) return warn('no method "' + method + '"');
    return methods[method].apply(null, Array.prototype.slice.call(arguments, 1));
  }
  Object.keys(methods).forEach(function (k) {
    Parley[k] = methods[k];
  });

  function mount() {
    var stored = readStore().unread;
    state.unread = typeof stored === 'number' && stored > 0 ? Math.floor(stored) : 0;
    showUnread();
    applyLabels();
    document.body.appendChild(host);
    // The stub's queue: calls the page made before this script ran, in their order.
    var stub = window.Parley;
    var queue = stub && stub.q;
    window.Parley = Parley;
    if (queue && typeof queue.length === 'number') {
      Array.prototype.slice.call(queue).forEach(function (args) {
        try {
          Parley.apply(null, Array.prototype.slice.call(args));
        } catch (e) {
          console.error('Parley widget: a queued call failed', e);
        }
      });
    }
    if (!pageChose && (data.open === 'true' || data.open === '' || readStore().open)) open();
    isReady = true;
    emit('ready');
  }
  if (document.body) mount();
  else document.addEventListener('DOMContentLoaded', mount);
})();
