//! The Turkish texts of the built-in UI messages.
//!
//! Invariants: keys are sorted bytewise and unique, every key exists in the English table, and each
//! text uses exactly the placeholders of its English text (tests check all three). Approval
//! prompts stay as plain and joke-free as the English ones.

/// Built-in messages in Turkish, sorted by key.
pub(super) const TR: &[(&str, &str)] = &[
    (
        "approval.already_decided",
        "Bu onay zaten karara bağlanmış.",
    ),
    ("approval.approved", "✓ {tool}: onaylandı"),
    ("approval.arguments", "Argümanlar:"),
    ("approval.arming", "(hazırlanıyor…)"),
    (
        "approval.awaiting_other_channel",
        "{channel} kanalında onay bekleniyor.",
    ),
    (
        "approval.bidi_warning",
        "Çift yönlü denetim karakterleri içeriyor; kaçış dizileriyle gösteriliyor.",
    ),
    ("approval.button_approve", "Bir kez onayla"),
    ("approval.button_reject", "Reddet"),
    (
        "approval.decided_elsewhere",
        "= {tool}: başka bir yerde karara bağlandı",
    ),
    (
        "approval.disconnected",
        "Merkezle bağlantı koptu; bağlantı geri gelene kadar onay verilemez.",
    ),
    ("approval.effect", "Etkisi:"),
    (
        "approval.enlarge_terminal",
        "Onaylamadan önce isteğin tamamını görmek için terminali büyütün.",
    ),
    (
        "approval.exempt",
        "{tool}: onay sorulmadan çalıştı (kayıtlı rutin).",
    ),
    (
        "approval.expired",
        "✗ {tool}: onayın süresi doldu; çalıştırılmadı.",
    ),
    (
        "approval.expired_by_restart",
        "✗ {tool}: bu onay beklerken merkez yeniden başladı; çalıştırılmadı.",
    ),
    ("approval.keys", "Tab geçiş · Enter seç · Esc reddet"),
    (
        "approval.no_terminal",
        "{tool} onay gerektiriyor, ama sorulacak terminal yok (girdi bir terminal değil)",
    ),
    ("approval.not_found", "Bekleyen böyle bir onay yok."),
    (
        "approval.not_your_channel",
        "Bu onay {channel} kanalına ait; lütfen orada yanıtlayın.",
    ),
    ("approval.paste_ignored", "Yapıştırılan metin yok sayıldı."),
    ("approval.question", "Onaylıyor musunuz? [e/H]"),
    ("approval.queue", "Sıradaki onay ({n}/{total})"),
    ("approval.rejected", "✗ {tool}: onaylanmadı"),
    ("approval.sending", "Gönderiliyor…"),
    (
        "approval.timed_out",
        "✗ {tool}: zamanında yanıt gelmedi; onaylanmadı",
    ),
    ("approval.title", "⚠️  Onay gerekli (kademe {tier})"),
    ("approval.tool", "Araç:"),
    (
        "approval.truncated",
        "Kısaltıldı ({bytes} bayt, sha256 {digest}).",
    ),
    ("banner.commands", "Komutlar: {hint} · Çıkmak için Ctrl-D"),
    (
        "banner.fake_model",
        "Model kimlik bilgisi bulunamadı; çevrimdışı sahte model kullanılıyor.",
    ),
    ("banner.history", "{id} oturumunun geçmişi ({count} ileti):"),
    (
        "banner.hub_profile",
        "Hub {profile} profiliyle çalışıyor; bu oturum da onu kullanıyor.",
    ),
    (
        "banner.no_config",
        "tau.toml bulunamadı; yerleşik varsayılanlarla çalışılıyor. `tau init` bir yapılandırma dosyası oluşturur.",
    ),
    (
        "banner.ready",
        "tau {version} hazır · profil {profile} · oturum {session}",
    ),
    (
        "chat.cancelling",
        "Tur iptal ediliyor… (beklemeyi bırakmak için yine Ctrl-C)",
    ),
    ("chat.ctrl_c_again", "Çıkmak için Ctrl-C'ye yeniden basın."),
    (
        "chat.detached",
        "Tur artık izlenmiyor; merkez onu bitirip saklayacak.",
    ),
    ("chat.goodbye", "Hoşça kalın."),
    (
        "chat.interrupted",
        "İptal edildi; merkezin yanıtı artık beklenmiyor.",
    ),
    (
        "chat.output_discarded",
        "(Yukarıdaki yanıt geçersiz sayıldı; model yeniden yanıtlıyor.)",
    ),
    (
        "chat.stream_lost",
        "Turun akışı koptu: {reason}. Merkez turu bitirip saklayacak.",
    ),
    ("chat.thinking", "Düşünüyor…"),
    ("command.clear.help", "Ekranı temizler; oturum sürer."),
    (
        "command.compact.help",
        "Konuşmayı özetleyip yeni bir oturumda sürdürür (isteğe bağlı odak).",
    ),
    ("command.help.help", "Komutları gösterir."),
    (
        "command.lang.help",
        "Arayüz dilini gösterir ya da bu çalışma için değiştirir (en, tr).",
    ),
    (
        "command.model.help",
        "Model rollerini listeler ya da birine geçer.",
    ),
    ("command.new.help", "Yeni bir oturum başlatır."),
    ("command.no_argument", "{command} argüman almaz."),
    ("command.quit.help", "Çıkar (Ctrl-D de çıkarır)."),
    (
        "command.resume.help",
        "En son oturuma, listedeki n'inci oturuma ya da kimliği verilen oturuma devam eder.",
    ),
    ("command.session.help", "Geçerli oturumu gösterir."),
    ("command.sessions.help", "Önceki son 10 oturumu listeler."),
    (
        "command.status.help",
        "Profili, oturumu, modeli, araçları, dili ve merkezi gösterir.",
    ),
    ("command.tools.help", "Araçları ve kademelerini listeler."),
    ("command.unavailable", "{command} burada kullanılamaz."),
    (
        "command.unknown",
        "Bilinmeyen komut: {command}. Komutlar: {hint}",
    ),
    ("command.usage", "Kullanım: {usage}"),
    (
        "compact.done",
        "{n} ileti bir özette toplandı. Yeni oturum: {id}; önceki oturum ({old}) saklanıyor.",
    ),
    (
        "compact.empty",
        "Özetlenecek bir şey yok: oturumda henüz ileti yok.",
    ),
    (
        "compact.failed",
        "Oturum özetlenemedi: {reason}. Hiçbir şey değişmedi.",
    ),
    ("compact.running", "{n} ileti özetleniyor…"),
    ("compact.summary", "Özet:"),
    (
        "help.footer",
        "Yazdığınız diğer her şey tau'ya gider. Çıkmak için Ctrl-D.",
    ),
    ("help.title", "Komutlar:"),
    ("history.earlier", "({count} önceki ileti gösterilmiyor)"),
    (
        "history.repaired",
        "↺ Yarım kalan geçmiş onarıldı: {notice}",
    ),
    ("history.tool_call", "→ {tool}"),
    ("history.tool_result", "← {tool}: {result}"),
    (
        "hub.disconnected",
        "Merkezle bağlantı koptu; yeniden bağlanılıyor…",
    ),
    ("hub.down", "{url} adresinde yanıt yok"),
    (
        "hub.not_running",
        "Yanıt veren bir merkez yok. `tau hub start` ile başlatın ya da `tau chat` komutunu --no-start olmadan çalıştırın.",
    ),
    ("hub.reconnected", "Merkeze yeniden bağlanıldı."),
    ("hub.start_failed", "Merkez başlatılamadı: {reason}"),
    ("hub.started", "Merkez arka planda başlatıldı (pid {pid})."),
    (
        "hub.timed_out",
        "Merkez {seconds} sn içinde yanıt vermedi; beklemekten vazgeçildi.",
    ),
    ("hub.up", "{url} adresinde yanıt veriyor"),
    ("label.approvals_pending", "Bekleyen onaylar"),
    ("label.backend", "Depo"),
    ("label.channel", "Kanal"),
    ("label.context", "Bağlam"),
    ("label.hub", "Merkez"),
    ("label.id", "Kimlik"),
    ("label.language", "Arayüz dili"),
    ("label.messages", "İleti sayısı"),
    ("label.model", "Model"),
    ("label.profile", "Profil"),
    ("label.role", "Rol"),
    ("label.routines", "Rutinler"),
    ("label.session", "Oturum"),
    ("label.spend", "Bugünkü harcama"),
    ("label.title", "Başlık"),
    ("label.tools", "Araçlar"),
    ("label.versions", "Sürümler"),
    (
        "lang.current",
        "Arayüz dili: {lang}. Kullanılabilir diller: {available}.",
    ),
    ("lang.switched", "Bu çalışma için arayüz dili: {lang}."),
    (
        "lang.unknown",
        "Bilinmeyen dil: {lang}. Kullanılabilir diller: {available}.",
    ),
    ("model.already", "Zaten {role} rolü kullanılıyor."),
    ("model.current", "(geçerli)"),
    ("model.fallback", "yedek {provider}, {model_id}"),
    ("model.fallback_in_use", "yedek sağlayıcı kullanılıyor"),
    ("model.fallback_standby", "kullanılmıyor"),
    ("model.header", "Model rolleri:"),
    ("model.line", "{role} → {provider}, {model_id}"),
    (
        "model.switch_failed",
        "{role} rolüne geçilemedi: {reason}. Geçerli model kullanılmaya devam ediyor.",
    ),
    (
        "model.switched",
        "{role} rolüne geçildi ({provider}, {model_id}).",
    ),
    (
        "model.unknown_role",
        "Bilinmeyen model rolü: {role}. Roller: {roles}.",
    ),
    (
        "notice.busy",
        "Bu oturumda başka bir tur sürüyor; bu tur onun bitmesini bekliyor.",
    ),
    ("notice.cancelled", "İptal edildi."),
    (
        "notice.content_filtered",
        "Sağlayıcı yanıtı durdurdu (içerik filtresi).",
    ),
    ("notice.error", "Hata: {error}"),
    (
        "notice.interrupt_refused",
        "Bir bileşen turu girdi beklemek için duraklatmak istedi; bu desteklenmediği için reddedildi.",
    ),
    (
        "notice.max_tokens",
        "Yanıt modelin çıktı sınırına ulaştı ve kesildi.",
    ),
    (
        "notice.max_turns",
        "Durduruldu: bu tur {limit} model çağrısı sınırına ulaştı ([agent] max_turns).",
    ),
    (
        "notice.model_error",
        "Model çağrısı başarısız oldu: {error}",
    ),
    (
        "notice.throttled",
        "Hız sınırına takıldı; {seconds} sn sonra yeniden deneniyor…",
    ),
    (
        "notice.token_budget",
        "Durduruldu: bu tur {limit} token'lık bütçesini tüketti ([agent] max_total_tokens).",
    ),
    (
        "session.context_mismatch",
        "{id} oturumu farklı bir [agent] context ayarıyla kaydedilmiş; ayarı yeniden {mode} yapın ya da yeni bir oturum başlatın.",
    ),
    (
        "session.invalid_id",
        "Geçerli bir oturum kimliği değil: {id}.",
    ),
    ("session.kept", "Geçerli oturum korunuyor."),
    ("session.new", "Yeni oturum: {id}."),
    (
        "session.no_such_index",
        "Listede {n} numaralı oturum yok; /sessions {count} oturum listeliyor.",
    ),
    (
        "session.none_to_resume",
        "Devam edilecek önceki bir oturum yok.",
    ),
    ("session.not_found", "Oturum bulunamadı: {id}."),
    (
        "session.resumed",
        "{id} oturumuna devam ediliyor: {title} ({count} ileti).",
    ),
    ("session.untitled", "(başlıksız)"),
    ("sessions.empty", "İleti içeren önceki bir oturum yok."),
    ("sessions.header", "Önceki oturumlar:"),
    (
        "sessions.line",
        "{n}. {id} {date} {channel} {title} ({count} ileti)",
    ),
    (
        "status.context",
        "{mode}, pencere {window}, bellekte {count} ileti",
    ),
    (
        "status.routines",
        "{count} ({paused} duraklatılmış){warnings}",
    ),
    (
        "status.session",
        "{id} · {title} · {count} ileti · rol {role}",
    ),
    ("status.spend_tokens", "{role} {count} token"),
    ("status.title", "tau durumu"),
    (
        "status.tools",
        "{count} kayıtlı, {approval} tanesi onay gerektiriyor",
    ),
    ("tier.0", "okuma"),
    ("tier.1", "dijital yazma"),
    ("tier.2", "fiziksel"),
    ("tier.label", "kademe {tier}"),
    ("tier.needs_approval", "onay gerektirir"),
    ("tool.failed", "✗ {tool}: başarısız oldu: {error}"),
    ("tool.progress", "⋯ {tool}: {progress}"),
    ("tool.running", "{tool} çalıştırılıyor…"),
    (
        "tool.unknown",
        "✗ {tool}: kayıtlı bir araç değil; çalıştırılmadı",
    ),
    ("tools.effect", "etkisi: {effect}"),
    ("tools.empty", "Kayıtlı araç yok."),
    ("tools.header", "Araçlar:"),
    (
        "tools.line",
        "{name} · kademe {tier} ({tier_label}) · {description}",
    ),
    ("tools.line_untiered", "{name} · kademesiz · {description}"),
    ("tools.node", "düğüm {node}"),
    (
        "tools.state.changed",
        "sunulmuyor: eşleştirmeden beri değişti (düğümü yeniden eşleştirin)",
    ),
    (
        "tools.state.missing",
        "sunulmuyor: sunucusu onu listelemiyor",
    ),
    (
        "tools.state.offline",
        "düğümü bağlı değil: bir çağrı hemen başarısız olur",
    ),
    ("tools.state.refused", "sunulmuyor: adı başka bir aracın"),
    (
        "tools.state.untiered",
        "sunulmuyor: merkezin tau.toml dosyasında kademesi yok",
    ),
    ("tui.composer", "İleti"),
    ("tui.conn.connecting", "Merkeze bağlanılıyor…"),
    ("tui.conn.failed", "Merkeze ulaşılamıyor."),
    (
        "tui.conn.retry",
        "{seconds} sn içinde yeniden bağlanılacak…",
    ),
    ("tui.conversation", "Sohbet"),
    ("tui.events", "Olaylar"),
    ("tui.filter", "Filtre"),
    (
        "tui.keys",
        "Enter gönder · Alt-↑/↓ oturumlar · / filtre · Ctrl-C çıkış",
    ),
    ("tui.sessions", "Oturumlar"),
    ("tui.state.awaiting_approval", "onay bekliyor"),
    ("tui.state.idle", "boşta"),
    ("tui.state.running", "çalışıyor"),
    ("value.no", "hayır"),
    ("value.none", "yok"),
    ("value.unknown", "bilinmiyor"),
    ("value.yes", "evet"),
];
