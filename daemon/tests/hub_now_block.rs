//! The `## Now` block the hub's agents read says what `GetStatus` says: a hub without nodes has
//! an empty list of live nodes, which reads `none`, not `unknown`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use support::hub::{drain, fixture};
use taud::message::SystemContentBlock;
use taud::testing::FakeReply;

#[tokio::test]
async fn a_hub_without_nodes_tells_the_model_none() {
    let f = fixture("file", vec![FakeReply::text("hi")]).await;
    let id = f.new_session().await;
    let mut turn = f.turn(&id, "hello", "terminal").await;
    drain(&mut turn).await;
    let request = f.model.last_request().expect("the model was called");
    let system = SystemContentBlock::join(&request.system);
    assert!(system.contains("- Live nodes: none\n"), "{system}");
    assert!(!system.contains("- Live nodes: unknown"), "{system}");
}
