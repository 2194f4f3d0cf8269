//! Links written in bulk (an import) and the link-expansion index rebuilt from the
//! store's accepted links.

use super::*;

impl Engine {
    /// Writes links (idempotent per from, to and kind, as an import does) and adds the
    /// accepted ones to the link-expansion index; returns how many were new.
    pub async fn insert_links(&self, links: &[ImportedLink]) -> Result<u64, EngineError> {
        let writes: Vec<kasten_store::ImportLinkWrite> =
            links.iter().cloned().map(Into::into).collect();
        let _order = self.index_order().await;
        let created = self.store.insert_import_links(&writes).await?;
        let sync = self.index_sync();
        let mut ix = self.write_indexes()?;
        for l in links
            .iter()
            .filter(|l| l.status == kasten_core::LinkStatus::Accepted)
        {
            if ix.vector.contains(&l.from) && ix.vector.contains(&l.to) {
                ix.add_link(&l.from, &l.to);
            }
        }
        drop(ix);
        sync.done();
        Ok(created)
    }

    /// Rebuilds the link-expansion index from the accepted links in the store (after links
    /// were written outside the pipeline and review, e.g. by an import or a benchmark).
    pub async fn reload_links(&self) -> Result<usize, EngineError> {
        let _order = self.index_order().await;
        let (links, n) = self.accepted_adjacency().await?;
        self.write_indexes()?.links = links;
        Ok(n)
    }

    /// The accepted links between indexed notes as adjacency, read from the store a page
    /// at a time, and how many there are.
    pub(crate) async fn accepted_adjacency(
        &self,
    ) -> Result<(HashMap<NoteId, Vec<NoteId>>, usize), EngineError> {
        let mut links = HashMap::new();
        let mut n = 0;
        let mut after = None;
        loop {
            let (page, next) = self.store.accepted_links_page(after, LINK_PAGE).await?;
            {
                let ix = self.read_indexes()?;
                for (a, b) in &page {
                    if ix.vector.contains(a) && ix.vector.contains(b) {
                        link_into(&mut links, a, b);
                        n += 1;
                    }
                }
            }
            match next {
                Some(cursor) => after = Some(cursor),
                None => return Ok((links, n)),
            }
        }
    }
}
